package dev.sparkscope.annotator;

import dev.sparkscope.annotator.container.ContainerSampler;
import dev.sparkscope.annotator.core.AnnotatorLog;
import dev.sparkscope.annotator.core.ProcessTreePeaks;
import dev.sparkscope.annotator.proctree.ProcessTreeReading;
import dev.sparkscope.annotator.proctree.ProcessTreeSampler;

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
 *
 * <p>It also measures each JVM's process tree (the JVM, its Python workers,
 * other children) from /proc without forking, every
 * {@code spark.executor.metrics.pollingInterval}, and writes Spark's own
 * ProcessTree*RSSMemory measurements, so that Spark's
 * {@code spark.executor.processTreeMetrics.enabled} (which forks pgrep per
 * process at every poll) can stay off; the executors send their peaks to the
 * driver here, for the listener's memory peaks.
 * Nothing here can fail a job: errors are logged and the sampler stops.
 */
public final class ContainerMemoryPlugin implements SparkPlugin {

    @Override
    public DriverPlugin driverPlugin() {
        return new DriverPlugin() {
            private ContainerSampler sampler;
            private ProcessTreeSampler tree;

            @Override
            public Map<String, String> init(SparkContext sc, PluginContext ctx) {
                return Collections.emptyMap();
            }

            /** The application id is known from here on (not yet at init). */
            @Override
            public void registerMetrics(String sparkAppId, PluginContext ctx) {
                sampler = ContainerSampler.start(key -> ctx.conf().get(key, null), "driver", sparkAppId);
                tree = ProcessTreeSampler.start(key -> ctx.conf().get(key, null), "driver", sparkAppId,
                        sizes -> ProcessTreePeaks.jvmWide().offer("driver", sizes));
            }

            /** An executor's process-tree peaks, for the listener's memory peaks in this JVM. */
            @Override
            public Object receive(Object message) {
                if (message instanceof ProcessTreeReading) {
                    ProcessTreeReading r = (ProcessTreeReading) message;
                    ProcessTreePeaks.jvmWide().offer(r.executorId, r.sizes);
                }
                return null;
            }

            @Override
            public void shutdown() {
                if (tree != null) {
                    tree.stop();
                }
                if (sampler != null) {
                    sampler.stop();
                }
            }
        };
    }

    @Override
    public ExecutorPlugin executorPlugin() {
        return new ExecutorPlugin() {
            private ContainerSampler sampler;
            private ProcessTreeSampler tree;

            @Override
            public void init(PluginContext ctx, Map<String, String> extraConf) {
                sampler = ContainerSampler.start(key -> ctx.conf().get(key, null), ctx.executorID(), null);
                String id = ctx.executorID();
                tree = ProcessTreeSampler.start(key -> ctx.conf().get(key, null), id, null,
                        sizes -> send(ctx, new ProcessTreeReading(id, sizes)));
            }

            @Override
            public void shutdown() {
                if (tree != null) {
                    tree.stop();
                }
                if (sampler != null) {
                    sampler.stop();
                }
            }
        };
    }

    /** One-way, never waits: a driver that cannot be reached loses a peak, the executor loses nothing. */
    private static void send(PluginContext ctx, ProcessTreeReading reading) {
        try {
            ctx.send(reading);
        } catch (Exception e) {
            AnnotatorLog.info("sparkscope process tree: peaks not sent to the driver: " + e);
        }
    }
}
