// H2Bench drives the H2 database engine (Debian's libh2-java, in memory)
// through JDBC with a fixed amount of work: it creates a table, inserts
// ROWS rows in batches, indexes a column, then runs QUERIES rounds of a
// range aggregate, point lookups, a GROUP BY and an UPDATE. It prints
// "ops N" after every 50 queries and "done CHECKSUM". The same SQL runs on
// another in-memory engine through its JDBC URL (djxbench's hsqldb:
// Debian's libhsqldb-java).
//
// Usage: java -cp /usr/share/java/h2.jar:. H2Bench [ROWS] [QUERIES] [JDBC-URL]
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.Statement;

public class H2Bench {
    public static void main(String[] args) throws Exception {
        int rows = args.length > 0 ? Integer.parseInt(args[0]) : 200_000;
        int queries = args.length > 1 ? Integer.parseInt(args[1]) : 2_000;
        String url = args.length > 2 ? args[2] : "jdbc:h2:mem:bench;DB_CLOSE_DELAY=-1";
        long check = 0;
        try (Connection c = DriverManager.getConnection(url, "sa", "")) {
            try (Statement s = c.createStatement()) {
                s.execute("DROP TABLE IF EXISTS t");
                s.execute("CREATE TABLE t(id INT PRIMARY KEY, grp INT, v DOUBLE, name VARCHAR(64), pad VARCHAR(256))");
            }
            c.setAutoCommit(false);
            long seed = 0x9E3779B97F4A7C15L;
            try (PreparedStatement p = c.prepareStatement("INSERT INTO t VALUES(?,?,?,?,?)")) {
                for (int i = 0; i < rows; i++) {
                    seed = seed * 6364136223846793005L + 1442695040888963407L;
                    p.setInt(1, i);
                    p.setInt(2, (int) ((seed >>> 33) % 1000));
                    p.setDouble(3, (seed >>> 11) * 0x1.0p-53);
                    p.setString(4, "name-" + Long.toHexString(seed));
                    p.setString(5, "pad-" + i + "-" + Long.toString(seed, 36) + "-" + Long.toString(~seed, 36));
                    p.addBatch();
                    if (i % 1000 == 999) p.executeBatch();
                }
                if (rows % 1000 != 0) p.executeBatch(); // HSQLDB refuses an empty batch
            }
            c.commit();
            try (Statement s = c.createStatement()) {
                s.execute("CREATE INDEX t_v ON t(v)");
            }
            c.commit();
            PreparedStatement range = c.prepareStatement("SELECT COUNT(*), SUM(grp) FROM t WHERE v BETWEEN ? AND ?");
            PreparedStatement point = c.prepareStatement("SELECT name, pad FROM t WHERE id = ?");
            PreparedStatement group = c.prepareStatement("SELECT grp, COUNT(*), AVG(v) FROM t WHERE grp < ? GROUP BY grp ORDER BY 2 DESC LIMIT 10");
            PreparedStatement upd = c.prepareStatement("UPDATE t SET v = v * 0.5 + ? WHERE id = ?");
            int step = 50; // fine enough for djxbench's toggle windows
            for (int q = 0; q < queries; q++) {
                seed = seed * 6364136223846793005L + 1442695040888963407L;
                double lo = (seed >>> 11) * 0x1.0p-53 * 0.98;
                range.setDouble(1, lo);
                range.setDouble(2, lo + 0.02);
                try (ResultSet r = range.executeQuery()) {
                    while (r.next()) check += r.getLong(1) + r.getLong(2);
                }
                for (int k = 0; k < 20; k++) {
                    point.setInt(1, (int) (((seed >>> 20) + k * 7919L) % rows));
                    try (ResultSet r = point.executeQuery()) {
                        while (r.next()) check += r.getString(1).length() + r.getString(2).length();
                    }
                }
                if (q % 100 == 0) {
                    group.setInt(1, 20 + (int) ((seed >>> 40) % 50));
                    try (ResultSet r = group.executeQuery()) {
                        while (r.next()) check += r.getLong(2);
                    }
                }
                upd.setDouble(1, lo * 0.5);
                upd.setInt(2, (int) ((seed >>> 25) % rows));
                upd.executeUpdate();
                if (q % 50 == 49) c.commit();
                if (q % step == step - 1) {
                    System.out.println("ops " + (q + 1));
                    System.out.flush();
                }
            }
            c.commit();
            try (Statement s = c.createStatement()) {
                s.execute("DROP TABLE t");
            }
        }
        System.out.println("done " + check);
    }
}
