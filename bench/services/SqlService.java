import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.Statement;
import java.util.concurrent.ThreadLocalRandom;

// An in-memory database service built the way real ones are: an embedded
// SQL database from Debian's packages (HSQLDB, H2) loads a table at
// start-up, then serves point lookups by primary key and range sums over a
// secondary index.
//
// Arguments: JDBC URL of an in-memory database, rows, seconds to run.
// Prints "ready", then "ops N" each second (queries so far).
public class SqlService {
    public static void main(String[] args) throws Exception {
        int rows = Integer.parseInt(args[1]);
        long secs = Long.parseLong(args[2]);
        Connection c = DriverManager.getConnection(args[0], "sa", "");
        try (Statement st = c.createStatement()) {
            st.execute("CREATE TABLE ITEMS(ID INT PRIMARY KEY, GRP INT, PRICE DOUBLE, NAME VARCHAR(40))");
            st.execute("CREATE INDEX ITEMS_GRP ON ITEMS(GRP)");
        }
        int groups = Math.max(1, rows / 100);
        try (PreparedStatement ins = c.prepareStatement("INSERT INTO ITEMS VALUES(?,?,?,?)")) {
            for (int i = 0; i < rows; i++) {
                ins.setInt(1, i);
                ins.setInt(2, i % groups);
                ins.setDouble(3, i * 0.01);
                ins.setString(4, "item-" + i);
                ins.addBatch();
                if (i % 1000 == 999) {
                    ins.executeBatch();
                }
            }
            if (rows % 1000 != 0) {
                ins.executeBatch();
            }
        }
        System.gc(); // start-up is over: the data is old
        System.out.println("ready");
        System.out.flush();
        PreparedStatement get = c.prepareStatement("SELECT PRICE FROM ITEMS WHERE ID=?");
        PreparedStatement sum = c.prepareStatement("SELECT SUM(PRICE) FROM ITEMS WHERE GRP=?");
        ThreadLocalRandom rnd = ThreadLocalRandom.current();
        long end = System.nanoTime() + secs * 1_000_000_000L, next = System.nanoTime() + 1_000_000_000L;
        long ops = 0;
        double total = 0;
        while (System.nanoTime() < end) {
            PreparedStatement q = ops % 10 == 9 ? sum : get;
            q.setInt(1, q == sum ? rnd.nextInt(groups) : rnd.nextInt(rows));
            try (ResultSet rs = q.executeQuery()) {
                if (rs.next()) {
                    total += rs.getDouble(1);
                }
            }
            ops++;
            if (System.nanoTime() > next) {
                System.out.println("ops " + ops);
                next += 1_000_000_000L;
            }
        }
        System.out.println("total " + total);
    }
}
