import com.almworks.sqlite4java.SQLiteConnection;
import com.almworks.sqlite4java.SQLiteStatement;
import java.io.File;
import java.lang.reflect.Field;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import org.eclipse.jetty.server.Connector;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;
import software.amazon.dynamodb.services.local.main.ServerRunner;
import software.amazon.dynamodb.services.local.server.DynamoDBProxyServer;

/**
 * Starts DynamoDB Local bound to 127.0.0.1 only, and with its stream
 * records indexed.
 *
 * DynamoDBLocal.jar has no option for the listen address and binds every
 * interface. This launcher builds the server from the usual command line,
 * sets the Jetty connector's host to loopback, then starts it.
 *
 * DynamoDB Local keeps every stream's records in one SQLite table, us,
 * keyed by SequenceNumber only. Each write to a stream-enabled table (and
 * the table check on every request) asks for MIN(SequenceNumber) of its
 * stream, a walk over the records of every older stream on the server
 * (kept 24 h; DeleteTable leaves them). On a server that already wrote
 * 20,000 records for other tables, a new table writes at about 20 a
 * second instead of 800. With -dbPath (a file database, which the Go side
 * puts on tmpfs) this launcher makes DynamoDB Local create its metadata
 * tables with one request, then adds the two indexes the stream queries
 * need, through sqlite4java (which DynamoDB Local ships and has already
 * loaded, so the file is written by the same SQLite), and checks with
 * EXPLAIN QUERY PLAN that SQLite uses them before it reports ready.
 * The indexes are added after the server's own start-up work (with
 * -optimizeDbBeforeStartup it rewrites the database's tables and indexes
 * first), so no start-up option can undo them; the Go side always starts
 * on an empty folder, so every start makes them anew.
 *
 * Those indexes alone do not bound GetRecords. us declares SequenceNumber
 * INTEGER PRIMARY KEY, which makes it SQLite's rowid, and the SQLite that
 * DynamoDB Local runs (sqlite4java's 3.8.7) cannot use a range on the
 * rowid inside an index: its plan for GetRecords is "USING INDEX
 * triage_us_shard_seq (ShardID=?)", a walk over every record of the
 * shard (and a row read each) to find the few past the iterator. A stream
 * reader that keeps up (the /stats counters poll every 250 ms) then costs
 * DynamoDB Local O(records in the shard) per poll: measured 80-600 ms a
 * GetRecords at 30,000 records, and task throughput on a table that had
 * kept 30,000 tasks fell to 0.4-0.7x a 2,000-task table's on the same
 * server. So, while us is still empty, this launcher makes it anew with
 * SequenceNumber declared INT, the same columns and primary key with the
 * same integer affinity, but an ordinary column with its own unique index;
 * the indexes then take the range ("ShardID=? AND SequenceNumber>?").
 * With -inMemory there is no file another connection could reach, and the
 * server runs unindexed, as shipped.
 *
 * Ready is one stdout line: "LISTENING", or "LISTENING INDEXED" once the
 * indexes are in place.
 */
public class DynamoDBLoopback {
    /** The file -sharedDb keeps every table in, inside -dbPath. */
    static final String SHARED_DB_FILE = "shared-local-instance.db";

    /** Each index, and a query of DynamoDB Local's that must use it. */
    static final String[][] INDEXES = {
        {"triage_us_stream_seq", "CREATE INDEX IF NOT EXISTS triage_us_stream_seq ON us(StreamID, SequenceNumber)",
         "SELECT MIN(SequenceNumber) FROM us WHERE StreamID = ?", "triage_us_stream_seq"},
        {"triage_us_shard_seq", "CREATE INDEX IF NOT EXISTS triage_us_shard_seq ON us(ShardID, SequenceNumber)",
         "SELECT SequenceNumber, StreamRecord FROM us WHERE ShardID = ? AND SequenceNumber >= ? ORDER BY SequenceNumber ASC LIMIT 1",
         "triage_us_shard_seq (ShardID=? AND SequenceNumber>?)"},
    };

    /**
     * GetRecords, as DynamoDB Local asks it; its plan must narrow the
     * sequence number too, not the shard or stream alone.
     */
    static final String GET_RECORDS = "SELECT SequenceNumber, StreamRecord, OperationType, CreationDateTime FROM us"
        + " WHERE StreamID = ? AND ShardID = ? AND SequenceNumber >= ? AND CreationDateTime > ? ORDER BY SequenceNumber ASC LIMIT ?";

    /** us as DynamoDB Local makes it, but for SequenceNumber's type: INT, so not the rowid. */
    static final String US_TABLE = "CREATE TABLE us (StreamID TEXT, ShardID TEXT, SequenceNumber INT, CreationDateTime INTEGER,"
        + " StreamRecord BLOB, OperationType TEXT, PRIMARY KEY(SequenceNumber))";

    public static void main(String[] args) throws Exception {
        DynamoDBProxyServer proxy = ServerRunner.createServerFromCommandLineArgs(args);
        Field field = DynamoDBProxyServer.class.getDeclaredField("server");
        field.setAccessible(true);
        Server server = (Server) field.get(proxy);
        for (Connector c : server.getConnectors()) {
            if (c instanceof ServerConnector) {
                ((ServerConnector) c).setHost("127.0.0.1");
            }
        }
        proxy.start();
        String dbPath = arg(args, "-dbPath");
        String ready = "LISTENING";
        if (dbPath != null) {
            openDatabase(Integer.parseInt(arg(args, "-port")));
            indexStreams(new File(dbPath, SHARED_DB_FILE));
            ready = "LISTENING INDEXED";
        }
        System.out.println(ready);
        System.out.flush();
        proxy.join();
    }

    static String arg(String[] args, String name) {
        for (int i = 0; i + 1 < args.length; i++) {
            if (args[i].equals(name)) {
                return args[i + 1];
            }
        }
        return null;
    }

    /**
     * openDatabase sends one ListTables, which makes DynamoDB Local open the
     * shared database file and create its metadata tables (us among them).
     * The signature is not checked; the header only has to parse.
     */
    static void openDatabase(int port) throws Exception {
        HttpClient client = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(10)).build();
        HttpRequest req = HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + "/"))
            .timeout(Duration.ofSeconds(30))
            .header("Content-Type", "application/x-amz-json-1.0")
            .header("X-Amz-Target", "DynamoDB_20120810.ListTables")
            .header("Authorization", "AWS4-HMAC-SHA256 Credential=test/20260101/us-east-1/dynamodb/aws4_request, SignedHeaders=host, Signature=00")
            .POST(HttpRequest.BodyPublishers.ofString("{}"))
            .build();
        HttpResponse<String> resp = client.send(req, HttpResponse.BodyHandlers.ofString());
        if (resp.statusCode() != 200) {
            throw new IllegalStateException("ListTables to open the database answered " + resp.statusCode() + ": " + resp.body());
        }
    }

    /** indexStreams adds the indexes and fails unless SQLite plans to use them. */
    static void indexStreams(File db) throws Exception {
        if (!db.isFile()) {
            throw new IllegalStateException("DynamoDB Local did not create " + db);
        }
        SQLiteConnection conn = new SQLiteConnection(db);
        try {
            conn.open(false);
            conn.setBusyTimeout(30000);
            conn.exec("BEGIN IMMEDIATE");
            if (count(conn, "SELECT COUNT(*) FROM us") != 0) {
                throw new IllegalStateException("us already holds stream records; the launcher starts on an empty database");
            }
            conn.exec("DROP TABLE us");
            conn.exec(US_TABLE);
            for (String[] ix : INDEXES) {
                conn.exec(ix[1]);
            }
            conn.exec("COMMIT");
            for (String[] ix : INDEXES) {
                String plan = plan(conn, ix[2]);
                if (!plan.contains(ix[3])) {
                    throw new IllegalStateException("SQLite does not use " + ix[3] + " for " + ix[2] + ": " + plan);
                }
            }
            String plan = plan(conn, GET_RECORDS);
            if (!plan.contains("SequenceNumber>?")) {
                throw new IllegalStateException("SQLite's GetRecords walks the whole shard: " + plan);
            }
        } finally {
            conn.dispose();
        }
    }

    static long count(SQLiteConnection conn, String query) throws Exception {
        SQLiteStatement st = conn.prepare(query);
        try {
            st.step();
            return st.columnLong(0);
        } finally {
            st.dispose();
        }
    }

    static String plan(SQLiteConnection conn, String query) throws Exception {
        SQLiteStatement st = conn.prepare("EXPLAIN QUERY PLAN " + query);
        try {
            StringBuilder sb = new StringBuilder();
            while (st.step()) {
                sb.append(st.columnString(st.columnCount() - 1)).append("; ");
            }
            return sb.toString();
        } finally {
            st.dispose();
        }
    }
}
