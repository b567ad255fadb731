package connectoffsets.it;

import java.io.FileOutputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;

/**
 * The runner's output file: appended to, one line per {@code write(2)} (a SIGKILL leaves whole lines
 * only), shared by the change handler and {@link RecordingOffsetStore}'s callbacks. No fsync: only
 * the JVM is killed, and the page cache keeps what was written.
 */
final class Output {
    private final FileOutputStream out;
    private long events;

    Output(String path) throws IOException {
        this.out = new FileOutputStream(path, true);
    }

    /** Writes {@code line} and a newline in one write. */
    synchronized void line(String line) throws IOException {
        out.write((line + "\n").getBytes(StandardCharsets.UTF_8));
    }

    /** Writes an {@code E} line and counts it. */
    synchronized void event(String line) throws IOException {
        line(line);
        events++;
    }

    /** How many {@code E} lines this run has written. */
    synchronized long events() {
        return events;
    }
}
