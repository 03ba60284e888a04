package dev.sparkscope.annotator.proctree;

import dev.sparkscope.annotator.core.AnnotatorLog;
import dev.sparkscope.annotator.core.ApplicationIdTag;
import dev.sparkscope.annotator.core.Background;
import dev.sparkscope.annotator.core.Point;
import dev.sparkscope.annotator.core.ProcessTreePeaks;
import dev.sparkscope.annotator.core.Schema;
import dev.sparkscope.annotator.core.SharedWriter;
import dev.sparkscope.annotator.core.SinkConfig;

import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.Arrays;
import java.util.Locale;
import java.util.function.Consumer;
import java.util.function.Function;

/**
 * One JVM's process-tree memory: a daemon thread that reads {@link ProcessTree}
 * every {@code spark.executor.metrics.pollingInterval} (Spark's own polling;
 * when 0 or unset, every 5 s) and writes Spark's three measurements
 * (ProcessTreeJVMRSSMemory, ProcessTreePythonRSSMemory,
 * ProcessTreeOtherRSSMemory; tags applicationid and executorid; a float
 * {@code value} in bytes), as Spark's Graphite sink does with its own
 * process-tree metrics on: every reader reads them unchanged. Like the sink,
 * it writes the latest reading every {@link #WRITE_EVERY_MS} (the shipped
 * sink's period; every poll when polling is slower), while every poll counts
 * for the peaks: a poll that writes costs an HTTP request, one that does not
 * only reads /proc. Its peaks go
 * to the driver's memory peaks through {@code peaks} (the plugin's RPC from
 * an executor, {@link ProcessTreePeaks} in the driver): at every new high,
 * and at least once a heartbeat interval while the tree runs.
 *
 * <p>Off, saying so once in the log, where Spark's own process-tree metrics
 * are on (the same series twice) or where there is no /proc.
 */
public final class ProcessTreeSampler implements Runnable {

    public static final String SPARK_PROCESS_TREE = "spark.executor.processTreeMetrics.enabled";
    static final String POLLING_INTERVAL = "spark.executor.metrics.pollingInterval";
    static final String HEARTBEAT_INTERVAL = "spark.executor.heartbeatInterval";
    static final long DEFAULT_PERIOD_MS = 5000;
    /** How often the series are written: the period of the Graphite sink as shipped (spark-conf/metrics.properties). */
    static final long WRITE_EVERY_MS = 5000;
    static final String[] MEASUREMENTS = {Schema.ProcessTreeJVMRSSMemory.NAME,
        Schema.ProcessTreePythonRSSMemory.NAME, Schema.ProcessTreeOtherRSSMemory.NAME};
    private static final int MAX_FAILURES = 12;

    private final ProcessTree tree;
    private final SharedWriter.Handle writer;
    private final SinkConfig config;
    private final String appId;
    private final String executorId;
    private final long periodMs;
    private final long sendEveryMs;
    private final long writeEveryMs;
    private long writtenMs;
    private boolean written;
    private final Consumer<long[]> peaks;
    private final long[] high = {-1, -1, -1};
    private long[] window;
    private long sentMs;
    private volatile boolean stopping;
    private Thread thread;

    ProcessTreeSampler(ProcessTree tree, SharedWriter.Handle writer, SinkConfig config, String appId,
                       String executorId, long periodMs, long sendEveryMs, Consumer<long[]> peaks) {
        this.tree = tree;
        this.writer = writer;
        this.config = config;
        this.appId = appId;
        this.executorId = executorId;
        this.periodMs = periodMs;
        this.sendEveryMs = sendEveryMs;
        this.writeEveryMs = Math.max(periodMs, WRITE_EVERY_MS);
        this.peaks = peaks;
    }

    /**
     * Starts sampling, or says in the log why not and returns null; never throws.
     * peaks: where each window's highest sizes go (see the class).
     */
    public static ProcessTreeSampler start(Function<String, String> conf, String executorId, String sparkAppId,
                                           Consumer<long[]> peaks) {
        return start(conf, executorId, sparkAppId, peaks, Paths.get("/proc"));
    }

    static ProcessTreeSampler start(Function<String, String> conf, String executorId, String sparkAppId,
                                    Consumer<long[]> peaks, Path proc) {
        try {
            if ("true".equalsIgnoreCase(String.valueOf(conf.apply(SPARK_PROCESS_TREE)).trim())) {
                AnnotatorLog.info("sparkscope process tree: not sampled on " + executorId + ": Spark's own "
                        + "process-tree metrics are on (" + SPARK_PROCESS_TREE + "=true) and write the same "
                        + "measurements; set it to false to measure without forking pgrep at every poll");
                return null;
            }
            String[] why = new String[1];
            ProcessTree tree = ProcessTree.locate(proc, why);
            if (tree == null) {
                AnnotatorLog.info("sparkscope process tree: off on " + executorId + ": " + why[0]);
                return null;
            }
            long period = millis(conf.apply(POLLING_INTERVAL), 0);
            if (period <= 0) {
                period = DEFAULT_PERIOD_MS;
            }
            long heartbeat = Math.max(period, millis(conf.apply(HEARTBEAT_INTERVAL), 10_000));
            SinkConfig config = SinkConfig.parse(conf);
            SharedWriter.Handle writer = SharedWriter.open(config, "sparkscope process tree", "process-tree sample");
            String appId = ApplicationIdTag.resolve(conf);
            ProcessTreeSampler s = new ProcessTreeSampler(tree, writer, config, appId != null ? appId : sparkAppId,
                    executorId, period, heartbeat, peaks);
            s.thread = Background.daemon(s, "sparkscope-process-tree");
            return s;
        } catch (Throwable t) {
            Background.off("sparkscope process tree", executorId, t);
        }
        return null;
    }

    /** A Spark time setting ("2s", "500ms", "1min"; a bare number is milliseconds), or dflt when unset. */
    static long millis(String text, long dflt) {
        if (text == null || text.trim().isEmpty()) {
            return dflt;
        }
        String t = text.trim().toLowerCase(Locale.ROOT);
        int digits = 0;
        while (digits < t.length() && Character.isDigit(t.charAt(digits))) {
            digits++;
        }
        if (digits == 0) {
            throw new IllegalArgumentException("not a time: " + text);
        }
        long n = Long.parseLong(t.substring(0, digits));
        switch (t.substring(digits).trim()) {
            case "": case "ms": return n;
            case "s": return n * 1000;
            case "m": case "min": return n * 60_000;
            case "h": return n * 3_600_000;
            case "us": return n / 1000;
            default: throw new IllegalArgumentException("not a time: " + text);
        }
    }

    @Override
    public void run() {
        int failures = 0;
        while (!stopping) {
            try {
                sample(System.currentTimeMillis());
                failures = 0;
            } catch (Exception e) {
                // The JVM's own statm unreadable (a /proc remounted under us): say so once,
                // keep trying a while, then stop rather than log every period.
                if (++failures == 1) {
                    AnnotatorLog.warn("sparkscope process tree: cannot read /proc for " + executorId + ": " + e);
                }
                if (failures >= MAX_FAILURES) {
                    AnnotatorLog.warn("sparkscope process tree: stopped on " + executorId + " after "
                            + MAX_FAILURES + " failed reads");
                    return;
                }
            }
            try {
                Thread.sleep(periodMs);
            } catch (InterruptedException e) {
                return;
            }
        }
    }

    /** One poll: read, write the three points and pass the peaks on when due. */
    void sample(long nowMs) throws java.io.IOException {
        long[] sizes = tree.read();
        // Half a poll of slack, so that polls every 2 s write every 4 s rather than every 6.
        if (!written || nowMs - writtenMs >= writeEveryMs - periodMs / 2) {
            written = true;
            writtenMs = nowMs;
            write(sizes, nowMs);
        }
        track(sizes, nowMs);
    }

    private void write(long[] sizes, long nowMs) {
        for (int i = 0; i < MEASUREMENTS.length; i++) {
            writer.enqueue(Point.measurement(MEASUREMENTS[i])
                    .tag(Schema.APPLICATION, appId)
                    .tag(Schema.EXECUTOR, executorId)
                    .wholeFloatField(Schema.ProcessTreeJVMRSSMemory.VALUE, sizes[i])
                    .timeMs(nowMs).toLine());
        }
    }

    private void track(long[] sizes, long nowMs) {
        boolean higher = false;
        if (window == null) {
            window = new long[] {-1, -1, -1};
        }
        for (int i = 0; i < sizes.length; i++) {
            window[i] = Math.max(window[i], sizes[i]);
            if (sizes[i] > high[i]) {
                high[i] = sizes[i];
                higher = true;
            }
        }
        if (higher || nowMs - sentMs >= sendEveryMs) {
            sentMs = nowMs;
            sendWindow();
        }
    }

    private void sendWindow() {
        if (window == null) {
            return;
        }
        long[] w = window;
        window = null;
        try {
            peaks.accept(w);
        } catch (Exception e) {
            // The driver gone (the application ending): the peaks it would have kept go with it.
        }
    }

    /** The highest sizes read so far (tests). */
    long[] high() {
        return Arrays.copyOf(high, high.length);
    }

    public void stop() {
        stopping = true;
        if (thread != null) {
            thread.interrupt();
            try {
                thread.join(1000);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
        sendWindow();
        writer.close(config.shutdownTimeoutMs);
    }
}
