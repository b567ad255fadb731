package connectoffsets.it;

import java.io.FileInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.kafka.connect.data.Field;
import org.apache.kafka.connect.data.Struct;
import org.apache.kafka.connect.source.SourceRecord;

import io.debezium.embedded.Connect;
import io.debezium.engine.DebeziumEngine;
import io.debezium.engine.format.ChangeEventFormat;
import io.debezium.engine.RecordChangeEvent;

/**
 * One Debezium 3.6 embedded engine (the async engine, {@code DebeziumEngine.create}'s default)
 * with the PostgreSQL connector, for tests/java/debezium.rs, which SIGKILLs it at random moments.
 *
 * <pre>
 *   java connectoffsets.it.DebeziumRunner OUTPUT PROPERTIES_FILE [key=value ...]
 * </pre>
 *
 * The engine's properties are the defaults below, then PROPERTIES_FILE, then each key=value
 * argument. Every property reaches the engine, and through its worker config the offset store
 * ({@code offset.storage}; see {@link RecordingOffsetStore}).
 *
 * OUTPUT is appended to, one line per fact, each in one write(2) so that a SIGKILL leaves whole
 * lines only:
 * <ul>
 *   <li>{@code S <pid>}: this JVM started (a new run);</li>
 *   <li>{@code T}: the connector's task started;</li>
 *   <li>{@code E <id> <op>}: a change event of {@code public.events} delivered to the handler
 *       ({@code op} is Debezium's: r snapshot read, c insert, u update, d delete), written before
 *       the record is marked processed;</li>
 *   <li>{@code C <n>}: written by {@link RecordingOffsetStore} when the offset store acknowledged
 *       a {@code set} that was called when this run had written n {@code E} lines, so that the
 *       first n events of this run are committed.</li>
 * </ul>
 * Only the JVM is killed, never the machine: no fsync.
 */
public final class DebeziumRunner {
    private DebeziumRunner() {
    }

    /** The run's output; {@link RecordingOffsetStore} writes its C lines through it. */
    static volatile Output out;

    static Output output() {
        Output o = out;
        if (o == null) {
            throw new IllegalStateException("RecordingOffsetStore runs inside DebeziumRunner only (no output file)");
        }
        return o;
    }

    static Properties defaults() {
        Properties p = new Properties();
        p.setProperty("name", "dbz-it");
        p.setProperty("connector.class", "io.debezium.connector.postgresql.PostgresConnector");
        p.setProperty("plugin.name", "pgoutput");
        p.setProperty("publication.autocreate.mode", "filtered");
        p.setProperty("table.include.list", "public.events");
        p.setProperty("topic.prefix", "dbz");
        p.setProperty("snapshot.mode", "initial");
        p.setProperty("database.hostname", "127.0.0.1");
        p.setProperty("database.port", "55432");
        p.setProperty("database.user", "postgres");
        // Trust authentication: the password is never checked.
        p.setProperty("database.password", "unused");
        // Small batches often (Debezium's queue waits up to poll.interval.ms, default 500 ms, for a
        // batch), committed at most every 200 ms: most kills land with events delivered but not
        // yet committed, which the restart must deliver again.
        p.setProperty("poll.interval.ms", "20");
        p.setProperty("offset.flush.interval.ms", "200");
        // The engine's default is 5 s; this machine stops as a whole at times (CONTRIBUTING.md).
        p.setProperty("offset.flush.timeout.ms", "60000");
        p.setProperty("offset.storage", RecordingOffsetStore.class.getName());
        return p;
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 2) {
            System.err.println("usage: DebeziumRunner OUTPUT PROPERTIES_FILE [key=value ...]");
            System.exit(2);
        }
        Properties props = defaults();
        try (InputStream in = new FileInputStream(args[1])) {
            props.load(in);
        }
        for (int i = 2; i < args.length; i++) {
            int eq = args[i].indexOf('=');
            if (eq <= 0) {
                System.err.println("not key=value: " + args[i]);
                System.exit(2);
            }
            props.setProperty(args[i].substring(0, eq), args[i].substring(eq + 1));
        }
        out = new Output(args[0]);
        out.line("S " + ProcessHandle.current().pid());

        AtomicBoolean failed = new AtomicBoolean();
        DebeziumEngine<RecordChangeEvent<SourceRecord>> engine = DebeziumEngine.create(ChangeEventFormat.of(Connect.class))
                .using(props)
                .using(new DebeziumEngine.ConnectorCallback() {
                    @Override
                    public void taskStarted() {
                        try {
                            out.line("T");
                        }
                        catch (IOException e) {
                            throw new RuntimeException(e);
                        }
                    }
                })
                .using((success, message, error) -> {
                    if (!success) {
                        failed.set(true);
                        System.err.println("DebeziumRunner: engine failed: " + message);
                        if (error != null) {
                            error.printStackTrace();
                        }
                    }
                    else {
                        System.err.println("DebeziumRunner: engine completed: " + message);
                    }
                })
                .notifying(DebeziumRunner::handleBatch)
                .build();
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            try {
                engine.close();
            }
            catch (IllegalStateException e) {
                // already stopped (it failed, or run() returned)
            }
            catch (Exception e) {
                e.printStackTrace();
            }
        }, "dbz-it-shutdown"));
        // The engine's run() returns when it stops (closed, or failed).
        engine.run();
        System.exit(failed.get() ? 3 : 0);
    }

    static void handleBatch(List<RecordChangeEvent<SourceRecord>> records,
                            DebeziumEngine.RecordCommitter<RecordChangeEvent<SourceRecord>> committer)
            throws InterruptedException {
        try {
            for (RecordChangeEvent<SourceRecord> event : records) {
                SourceRecord r = event.record();
                if (r.topic() != null && r.topic().endsWith(".public.events") && r.value() instanceof Struct value
                        && value.schema().field("op") != null) {
                    String op = value.getString("op");
                    Object id = idOf(value, r.key());
                    out.event("E " + id + " " + op);
                }
                committer.markProcessed(event);
            }
            committer.markBatchFinished();
        }
        catch (IOException e) {
            throw new RuntimeException("cannot write the output file", e);
        }
    }

    private static Object idOf(Struct value, Object key) {
        for (String side : new String[]{ "after", "before" }) {
            Field f = value.schema().field(side);
            if (f != null && value.getStruct(side) != null) {
                return value.getStruct(side).get("id");
            }
        }
        if (key instanceof Struct k) {
            return k.get("id");
        }
        return "?";
    }
}
