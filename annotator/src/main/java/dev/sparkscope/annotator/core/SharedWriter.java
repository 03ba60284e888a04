package dev.sparkscope.annotator.core;

import java.util.HashMap;
import java.util.Map;
import java.util.function.Supplier;

/**
 * One writer per JVM and endpoint, shared by every part of the jar that runs
 * there: the driver runs the listener and the container sampler, an executor
 * the container sampler and the profiler. Each part opens a {@link Handle};
 * the first open starts the writer (one queue, one thread, one connection),
 * the last close flushes and stops it. Each handle writes through its own
 * {@link InfluxWriter.Source}, so the log still names the part whose lines
 * were lost.
 */
public final class SharedWriter {

    /** Open writers by endpoint and credentials. Guarded by itself. */
    private static final Map<String, SharedWriter> OPEN = new HashMap<>();

    private final String key;
    private final InfluxWriter writer;
    private int users;

    private SharedWriter(String key, InfluxWriter writer) {
        this.key = key;
        this.writer = writer;
    }

    /**
     * A handle on this JVM's writer for the config's endpoint, starting it if
     * none is open. label: the part's name in the log ("sparkscope profiler");
     * unit: what its lines are called there ("profile line").
     */
    public static Handle open(SinkConfig config, String label, String unit) {
        String key = config.writeUrl() + "\n" + config.authorizationHeader();
        return open(key, () -> new InfluxWriter(new HttpLineSender(config.writeUrl(), config.authorizationHeader()),
                InfluxWriter.Settings.from(config), AnnotatorLog::warn, AnnotatorLog::info, null, null), label, unit);
    }

    /** key: what makes two users share (endpoint and credentials); create: the writer when none is open. */
    static Handle open(String key, Supplier<InfluxWriter> create, String label, String unit) {
        synchronized (OPEN) {
            SharedWriter shared = OPEN.get(key);
            if (shared == null) {
                // The first user's settings (batching, queue) hold for all: in one JVM they
                // all read the same SparkConf, so they agree anyway.
                shared = new SharedWriter(key, create.get());
                shared.writer.start();
                OPEN.put(key, shared);
            }
            shared.users++;
            return new Handle(shared, shared.writer.source(label, unit));
        }
    }

    /** Writers open in this JVM (tests). */
    static int openWriters() {
        synchronized (OPEN) {
            return OPEN.size();
        }
    }

    /** One part's use of the shared writer. */
    public static final class Handle {
        private final SharedWriter shared;
        private final InfluxWriter.Source source;
        private boolean closed;

        private Handle(SharedWriter shared, InfluxWriter.Source source) {
            this.shared = shared;
            this.source = source;
        }

        /** Never blocks (see InfluxWriter.enqueue). */
        public void enqueue(String line) {
            source.enqueue(line);
        }

        /** The endpoint, credentials hidden, for the part's own log lines. */
        public String endpoint() {
            return shared.writer.endpoint();
        }

        InfluxWriter writer() {
            return shared.writer;
        }

        InfluxWriter.Source source() {
            return source;
        }

        /**
         * This part is done. Its queued lines are still sent; the last part to
         * close flushes everything and stops the writer, waiting at most
         * timeoutMs. Returns false when that flush did not send everything.
         */
        public boolean close(long timeoutMs) {
            boolean last;
            synchronized (OPEN) {
                if (closed) {
                    return true;
                }
                closed = true;
                last = --shared.users == 0;
                if (last) {
                    // Out of the map before the flush: a part starting meanwhile gets a new writer.
                    OPEN.remove(shared.key);
                }
            }
            return !last || shared.writer.shutdown(timeoutMs);
        }
    }
}
