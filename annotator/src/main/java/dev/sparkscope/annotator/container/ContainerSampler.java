package dev.sparkscope.annotator.container;

import dev.sparkscope.annotator.core.AnnotatorLog;
import dev.sparkscope.annotator.core.ApplicationIdTag;
import dev.sparkscope.annotator.core.Background;
import dev.sparkscope.annotator.core.ConfigKeys;
import dev.sparkscope.annotator.core.SharedWriter;
import dev.sparkscope.annotator.core.SinkConfig;

import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.Collections;
import java.util.List;
import java.util.function.Function;

/**
 * One JVM's container memory sampling: a daemon thread that reads the JVM's
 * own memory cgroup every {@code spark.sparkscope.container.periodSeconds}
 * and writes it as one small point. Started by ContainerMemoryPlugin in the
 * driver and in each executor; it reads the sink's keys and its own only.
 */
public final class ContainerSampler implements Runnable {

    public static final String PERIOD_S = ConfigKeys.PREFIX + "container.periodSeconds";
    /** This product's own keys (for typo detection; the sink's are SinkConfig.KEYS). */
    public static final List<String> KEYS = Collections.singletonList(PERIOD_S);

    private final CgroupMemory cgroup;
    private final SharedWriter.Handle writer;
    private final SinkConfig config;
    private final String appId;
    private final String executorId;
    private final long periodMs;
    private volatile boolean stopping;
    private Thread thread;

    ContainerSampler(CgroupMemory cgroup, SharedWriter.Handle writer, SinkConfig config, String appId,
                     String executorId, long periodMs) {
        this.cgroup = cgroup;
        this.writer = writer;
        this.config = config;
        this.appId = appId;
        this.executorId = executorId;
        this.periodMs = periodMs;
    }

    /**
     * Starts sampling, or says in the log why not and returns null; never throws.
     * conf: Spark's settings (null when unset); sparkAppId: Spark's id when the
     * caller knows it, for a namespace that does not resolve.
     */
    public static ContainerSampler start(Function<String, String> conf, String executorId, String sparkAppId) {
        return start(conf, executorId, sparkAppId, Paths.get("/"));
    }

    /** fsRoot: where /proc and the cgroup mounts are read (tests give a fake tree). */
    static ContainerSampler start(Function<String, String> conf, String executorId, String sparkAppId, Path fsRoot) {
        try {
            long periodS = periodSeconds(conf.apply(PERIOD_S));
            String[] why = new String[1];
            CgroupMemory cgroup = CgroupMemory.locate(fsRoot, why);
            if (cgroup == null) {
                AnnotatorLog.info("sparkscope container memory: not read on " + executorId + ": " + why[0]);
                return null;
            }
            SinkConfig config = SinkConfig.parse(conf);
            // Its own words in the log: beside the listener in the driver (the same writer),
            // a reader must tell whose points could not be written.
            SharedWriter.Handle writer = SharedWriter.open(config, "sparkscope container memory",
                    "container sample");
            String appId = ApplicationIdTag.resolve(conf);
            ContainerSampler s = new ContainerSampler(cgroup, writer, config, appId != null ? appId : sparkAppId,
                    executorId, periodS * 1000L);
            s.thread = Background.daemon(s, "sparkscope-container-memory");
            return s;
        } catch (Throwable t) {
            Background.off("sparkscope container memory", executorId, t);
        }
        return null;
    }

    static long periodSeconds(String text) {
        if (text == null || text.trim().isEmpty()) {
            return 5;
        }
        try {
            long n = Long.parseLong(text.trim());
            if (n >= 1 && n <= 3600) {
                return n;
            }
        } catch (NumberFormatException ignored) {
            // told below
        }
        throw new IllegalArgumentException(PERIOD_S + "=" + text + " must be whole seconds, 1..3600");
    }

    @Override
    public void run() {
        int failures = 0;
        while (!stopping) {
            try {
                writer.enqueue(cgroup.sample().point(appId, executorId, System.currentTimeMillis()).toString());
                failures = 0;
            } catch (Exception e) {
                // A cgroup removed under us, a file the kernel stopped offering: say so
                // once, keep trying a while, then stop rather than log every period.
                if (++failures == 1) {
                    AnnotatorLog.warn("sparkscope container memory: cannot read " + cgroup.dir() + ": " + e);
                }
                if (failures >= 12) {
                    AnnotatorLog.warn("sparkscope container memory: stopped on " + executorId
                            + " after 12 failed reads");
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

    public void stop() {
        stopping = true;
        if (thread != null) {
            thread.interrupt();
            try {
                // The last reading (the peak before a stop) is worth the wait of one read.
                thread.join(1000);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
        writer.close(config.shutdownTimeoutMs);
    }
}
