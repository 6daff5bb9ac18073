// XalanBench runs Apache Xalan-J (Debian's libxalan2-java) on a generated
// document with a fixed amount of work: it builds an XML catalog of ITEMS
// items, compiles a stylesheet that sorts, groups (Muenchian keys), formats
// numbers and builds strings, and transforms the document ROUNDS times into
// a byte buffer. It prints "ops N" after each round and "done CHECKSUM".
//
// The interpretive processor is used (org.apache.xalan.processor.
// TransformerFactoryImpl), named explicitly so the JDK's built-in XSLTC is
// never picked instead.
//
// Usage: java -cp /usr/share/java/xalan2.jar:/usr/share/java/serializer.jar:. XalanBench [ITEMS] [ROUNDS]
import java.io.ByteArrayOutputStream;
import java.io.StringReader;
import javax.xml.transform.Templates;
import javax.xml.transform.Transformer;
import javax.xml.transform.TransformerFactory;
import javax.xml.transform.stream.StreamResult;
import javax.xml.transform.stream.StreamSource;

public class XalanBench {
    static final String XSL =
        "<xsl:stylesheet version='1.0' xmlns:xsl='http://www.w3.org/1999/XSL/Transform'>\n"
        + "<xsl:output method='html' indent='no'/>\n"
        + "<xsl:key name='bycat' match='item' use='@cat'/>\n"
        + "<xsl:template match='/catalog'>\n"
        + " <html><body>\n"
        + " <xsl:for-each select='item[generate-id() = generate-id(key(\"bycat\", @cat)[1])]'>\n"
        + "  <xsl:sort select='@cat'/>\n"
        + "  <h2><xsl:value-of select='@cat'/> (<xsl:value-of select='count(key(\"bycat\", @cat))'/>)</h2>\n"
        + "  <table>\n"
        + "  <xsl:for-each select='key(\"bycat\", @cat)'>\n"
        + "   <xsl:sort select='price' data-type='number' order='descending'/>\n"
        + "   <xsl:if test='position() &lt;= 50'>\n"
        + "   <tr><td><xsl:value-of select='concat(name, \" / \", translate(desc, \"abcdef\", \"ABCDEF\"))'/></td>\n"
        + "       <td><xsl:value-of select='format-number(price * qty, \"#,##0.00\")'/></td></tr>\n"
        + "   </xsl:if>\n"
        + "  </xsl:for-each>\n"
        + "  </table>\n"
        + "  <p>total <xsl:value-of select='format-number(sum(key(\"bycat\", @cat)/price), \"0.00\")'/></p>\n"
        + " </xsl:for-each>\n"
        + " </body></html>\n"
        + "</xsl:template>\n"
        + "</xsl:stylesheet>\n";

    public static void main(String[] args) throws Exception {
        int items = args.length > 0 ? Integer.parseInt(args[0]) : 20_000;
        int rounds = args.length > 1 ? Integer.parseInt(args[1]) : 20;
        StringBuilder sb = new StringBuilder(items * 160);
        sb.append("<?xml version='1.0'?>\n<catalog>\n");
        long seed = 42;
        for (int i = 0; i < items; i++) {
            seed = seed * 6364136223846793005L + 1442695040888963407L;
            sb.append("<item id='").append(i).append("' cat='c").append((seed >>> 33) % 40).append("'>")
              .append("<name>item ").append(Long.toString(seed >>> 20, 36)).append("</name>")
              .append("<price>").append(((seed >>> 12) % 100000) / 100.0).append("</price>")
              .append("<qty>").append((seed >>> 50) % 17 + 1).append("</qty>")
              .append("<desc>a fine ").append(Long.toHexString(seed)).append(" for the deck</desc>")
              .append("</item>\n");
        }
        sb.append("</catalog>\n");
        String doc = sb.toString();
        TransformerFactory tf = TransformerFactory.newInstance("org.apache.xalan.processor.TransformerFactoryImpl", null);
        Templates tpl = tf.newTemplates(new StreamSource(new StringReader(XSL)));
        long check = 0;
        for (int r = 0; r < rounds; r++) {
            Transformer t = tpl.newTransformer();
            ByteArrayOutputStream out = new ByteArrayOutputStream(1 << 20);
            t.transform(new StreamSource(new StringReader(doc)), new StreamResult(out));
            check += out.size();
            System.out.println("ops " + (r + 1));
            System.out.flush();
        }
        System.out.println("done " + check);
    }
}
