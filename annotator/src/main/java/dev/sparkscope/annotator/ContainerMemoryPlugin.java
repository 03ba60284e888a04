package dev.sparkscope.annotator;

import org.apache.spark.SparkContext;
import org.apache.spark.api.plugin.DriverPlugin;
import org.apache.spark.api.plugin.ExecutorPlugin;
import org.apache.spark.api.plugin.PluginContext;
import org.apache.spark.api.plugin.SparkPlugin;

import java.nio.file.Paths;
import java.util.Collections;
import java.util.Map;
import java.util.function.Function;

/**
 * {@code spark.plugins=dev.sparkscope.annotator.ContainerMemoryPlugin}: each
 * executor and the driver read their own container's memory cgroup every
 * {@code spark.sparkscope.container.periodSeconds} (5 s, Spark's sink period)
 * and write it to Telegraf as {@code sparkscope_container}: the limit, usage,
 * working set, anonymous and file memory, limit hits and OOM kills. From
 * inside the container, so it needs no privileges and works in a pod; the
 * kill of the JVM itself is told by the driver (the annotator's executor
 * removed event and its reason), since a killed JVM writes nothing.
 * Nothing here can fail a job: errors are logged and the sampler stops.
 */
public final class ContainerMemoryPlugin implements SparkPlugin {

    static final String PERIOD_S = AnnotatorConfig.PREFIX + "container.periodSeconds";

    @Override
    public DriverPlugin driverPlugin() {
        return new DriverPlugin() {
            private Sampler sampler;

            @Override
            public Map<String, String> init(SparkContext sc, PluginContext ctx) {
                return Collections.emptyMap();
            }

            /** The application id is known from here on (not yet at init). */
            @Override
            public void registerMetrics(String sparkAppId, PluginContext ctx) {
                sampler = Sampler.start(ctx, "driver", sparkAppId);
            }

            @Override
            public void shutdown() {
                if (sampler != null) {
                    sampler.stop();
                }
            }
        };
    }

    @Override
    public ExecutorPlugin executorPlugin() {
        return new ExecutorPlugin() {
            private Sampler sampler;

            @Override
            public void init(PluginContext ctx, Map<String, String> extraConf) {
                sampler = Sampler.start(ctx, ctx.executorID(), null);
            }

            @Override
            public void shutdown() {
                if (sampler != null) {
                    sampler.stop();
                }
            }
        };
    }

    /** One JVM's sampling thread and its writer. */
    static final class Sampler implements Runnable {
        private final CgroupMemory cgroup;
        private final InfluxWriter writer;
        private final AnnotatorConfig config;
        private final String appId;
        private final String executorId;
        private final long periodMs;
        private volatile boolean stopping;
        private Thread thread;

        Sampler(CgroupMemory cgroup, InfluxWriter writer, AnnotatorConfig config, String appId, String executorId,
                long periodMs) {
            this.cgroup = cgroup;
            this.writer = writer;
            this.config = config;
            this.appId = appId;
            this.executorId = executorId;
            this.periodMs = periodMs;
        }

        /** sparkAppId: Spark's id when the caller knows it, for a namespace that does not resolve. */
        static Sampler start(PluginContext ctx, String executorId, String sparkAppId) {
            try {
                Function<String, String> conf = key -> ctx.conf().get(key, null);
                long periodS = periodSeconds(conf.apply(PERIOD_S));
                String[] why = new String[1];
                CgroupMemory cgroup = CgroupMemory.locate(Paths.get("/"), why);
                if (cgroup == null) {
                    AnnotatorLog.info("sparkscope container memory: not read on " + executorId + ": " + why[0]);
                    return null;
                }
                AnnotatorConfig config = AnnotatorConfig.parse(conf);
                // Its own words in the log: beside the listener's writer in the driver, a reader
                // must tell whose points could not be written.
                InfluxWriter writer = new InfluxWriter(
                        new HttpLineSender(config.writeUrl(), config.authorizationHeader()),
                        InfluxWriter.Settings.from(config), m -> AnnotatorLog.warn(relabel(m)),
                        m -> AnnotatorLog.info(relabel(m)));
                writer.start();
                String appId = ApplicationIdTag.resolve(conf);
                Sampler s = new Sampler(cgroup, writer, config, appId != null ? appId : sparkAppId, executorId,
                        periodS * 1000L);
                s.thread = new Thread(s, "sparkscope-container-memory");
                s.thread.setDaemon(true);
                s.thread.start();
                return s;
            } catch (IllegalArgumentException e) {
                AnnotatorLog.warn("sparkscope container memory is off on " + executorId + ": " + e.getMessage()
                        + ". Fix the setting (annotator README); Spark runs normally.");
            } catch (Throwable t) {
                AnnotatorLog.warn("sparkscope container memory is off on " + executorId + ": could not start: " + t);
            }
            return null;
        }

        static String relabel(String message) {
            return message.replace("sparkscope annotator:", "sparkscope container memory:")
                    .replace("annotation line", "container sample");
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

        void stop() {
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
            writer.shutdown(config.shutdownTimeoutMs);
        }
    }
}
