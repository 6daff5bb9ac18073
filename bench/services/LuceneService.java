import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Comparator;
import java.util.SplittableRandom;
import java.util.stream.Stream;
import org.apache.lucene.analysis.standard.StandardAnalyzer;
import org.apache.lucene.document.Document;
import org.apache.lucene.document.Field;
import org.apache.lucene.document.IntPoint;
import org.apache.lucene.document.NumericDocValuesField;
import org.apache.lucene.document.SortedDocValuesField;
import org.apache.lucene.document.StoredField;
import org.apache.lucene.document.StringField;
import org.apache.lucene.document.TextField;
import org.apache.lucene.index.DirectoryReader;
import org.apache.lucene.index.IndexWriter;
import org.apache.lucene.index.IndexWriterConfig;
import org.apache.lucene.index.LeafReader;
import org.apache.lucene.index.LeafReaderContext;
import org.apache.lucene.index.NumericDocValues;
import org.apache.lucene.index.PostingsEnum;
import org.apache.lucene.index.Term;
import org.apache.lucene.index.Terms;
import org.apache.lucene.index.TermsEnum;
import org.apache.lucene.search.BooleanClause;
import org.apache.lucene.search.BooleanQuery;
import org.apache.lucene.search.DocIdSetIterator;
import org.apache.lucene.search.IndexSearcher;
import org.apache.lucene.search.Query;
import org.apache.lucene.search.ScoreDoc;
import org.apache.lucene.search.TermQuery;
import org.apache.lucene.search.TopDocs;
import org.apache.lucene.store.MMapDirectory;
import org.apache.lucene.util.BytesRef;

// A search service built the way real ones are: a Lucene index (Debian's
// liblucene8-java) of generated documents, written at start-up to a temp
// directory and opened with MMapDirectory, so that queries read the index
// files through the MappedByteBuffers that map them; the searcher is held
// by a static field. It then serves term, boolean and range queries, and
// walks postings and doc values.
//
// Arguments: documents, seconds to run. Prints "ready", then "ops N" each
// second (queries so far).
public class LuceneService {
    static IndexSearcher searcher;

    static final int WORDS = 20_000;

    // Words of a Zipf-like vocabulary: a few very common, most rare.
    static String word(SplittableRandom rnd) {
        double u = rnd.nextDouble();
        return "w" + Integer.toString((int) (WORDS * u * u * u), 36);
    }

    public static void main(String[] args) throws Exception {
        int n = Integer.parseInt(args[0]);
        long secs = Long.parseLong(args[1]);
        Path dir = Files.createTempDirectory("lucene-svc");
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            try (Stream<Path> s = Files.walk(dir)) {
                s.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
            } catch (Exception e) {
                // best effort: it is a temp directory
            }
        }));
        MMapDirectory mdir = new MMapDirectory(dir);
        SplittableRandom rnd = new SplittableRandom(42);
        IndexWriterConfig cfg = new IndexWriterConfig(new StandardAnalyzer());
        cfg.setRAMBufferSizeMB(128);
        cfg.setUseCompoundFile(false); // one mapped file per kind of data (.doc, .tim, .dvd, ...)
        cfg.getMergePolicy().setNoCFSRatio(0);
        try (IndexWriter w = new IndexWriter(mdir, cfg)) {
            StringBuilder sb = new StringBuilder();
            for (int i = 0; i < n; i++) {
                Document d = new Document();
                sb.setLength(0);
                int len = 20 + rnd.nextInt(30);
                for (int j = 0; j < len; j++) {
                    sb.append(word(rnd)).append(' ');
                }
                d.add(new TextField("body", sb.toString(), Field.Store.YES));
                sb.setLength(0);
                for (int j = 0; j < 4; j++) {
                    sb.append(word(rnd)).append(' ');
                }
                d.add(new TextField("title", sb.toString(), Field.Store.YES));
                String cat = "c" + rnd.nextInt(500);
                d.add(new StringField("cat", cat, Field.Store.NO));
                d.add(new SortedDocValuesField("cat", new BytesRef(cat)));
                int price = rnd.nextInt(1_000_000);
                d.add(new IntPoint("price", price));
                d.add(new NumericDocValuesField("price", price));
                d.add(new StoredField("id", i));
                w.addDocument(d);
            }
            w.forceMerge(4);
        }
        DirectoryReader reader = DirectoryReader.open(mdir);
        searcher = new IndexSearcher(reader);
        System.gc(); // start-up is over: the data is old
        long bytes = 0;
        for (String f : mdir.listAll()) {
            bytes += mdir.fileLength(f);
        }
        System.out.println("index " + reader.maxDoc() + " docs " + (bytes >> 20) + " MiB in " + dir);
        System.out.println("ready");
        System.out.flush();
        long end = System.nanoTime() + secs * 1_000_000_000L, next = System.nanoTime() + 1_000_000_000L;
        long ops = 0, found = 0;
        while (System.nanoTime() < end) {
            switch ((int) (ops % 5)) {
                case 0: {
                    // A search returns documents: the top hits' stored titles.
                    TopDocs top = searcher.search(new TermQuery(new Term("body", word(rnd))), 10);
                    for (ScoreDoc sd : top.scoreDocs) {
                        found += searcher.doc(sd.doc).get("title").length();
                    }
                    break;
                }
                case 1: {
                    BooleanQuery.Builder b = new BooleanQuery.Builder();
                    b.add(new TermQuery(new Term("body", word(rnd))), BooleanClause.Occur.MUST);
                    b.add(new TermQuery(new Term("body", word(rnd))), BooleanClause.Occur.SHOULD);
                    b.add(new TermQuery(new Term("cat", "c" + rnd.nextInt(500))), BooleanClause.Occur.FILTER);
                    found += searcher.search(b.build(), 10).totalHits.value;
                    break;
                }
                case 2: {
                    int lo = rnd.nextInt(1_000_000);
                    Query q = IntPoint.newRangeQuery("price", lo, lo + 2_000);
                    found += searcher.count(q);
                    break;
                }
                case 3:
                    found += postings(searcher.getIndexReader().leaves(), word(rnd));
                    break;
                default:
                    found += docValues(searcher.getIndexReader().leaves(), rnd);
            }
            ops++;
            if (System.nanoTime() > next) {
                System.out.println("ops " + ops);
                next += 1_000_000_000L;
            }
        }
        System.out.println("found " + found);
    }

    // Sums the term frequencies of a word's postings in every segment.
    static long postings(java.util.List<LeafReaderContext> leaves, String word) throws Exception {
        long sum = 0;
        BytesRef t = new BytesRef(word);
        for (LeafReaderContext c : leaves) {
            Terms terms = c.reader().terms("body");
            if (terms == null) {
                continue;
            }
            TermsEnum te = terms.iterator();
            if (!te.seekExact(t)) {
                continue;
            }
            PostingsEnum pe = te.postings(null, PostingsEnum.FREQS);
            for (int d = pe.nextDoc(); d != DocIdSetIterator.NO_MORE_DOCS; d = pe.nextDoc()) {
                sum += pe.freq();
            }
        }
        return sum;
    }

    // Sums the prices of a run of documents in each segment from doc values.
    static long docValues(java.util.List<LeafReaderContext> leaves, SplittableRandom rnd) throws Exception {
        long sum = 0;
        for (LeafReaderContext c : leaves) {
            LeafReader r = c.reader();
            NumericDocValues dv = r.getNumericDocValues("price");
            if (dv == null) {
                continue;
            }
            int start = rnd.nextInt(Math.max(1, r.maxDoc())), stop = Math.min(r.maxDoc(), start + 20_000);
            for (int d = dv.advance(start); d < stop; d = dv.nextDoc()) {
                sum += dv.longValue();
            }
        }
        return sum;
    }
}
