package dev.sparkscope.annotator;

import dev.sparkscope.annotator.container.ContainerSampler;

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

    @Override
    public DriverPlugin driverPlugin() {
        return new DriverPlugin() {
            private ContainerSampler sampler;

            @Override
            public Map<String, String> init(SparkContext sc, PluginContext ctx) {
                return Collections.emptyMap();
            }

            /** The application id is known from here on (not yet at init). */
            @Override
            public void registerMetrics(String sparkAppId, PluginContext ctx) {
                sampler = ContainerSampler.start(key -> ctx.conf().get(key, null), "driver", sparkAppId);
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
            private ContainerSampler sampler;

            @Override
            public void init(PluginContext ctx, Map<String, String> extraConf) {
                sampler = ContainerSampler.start(key -> ctx.conf().get(key, null), ctx.executorID(), null);
            }

            @Override
            public void shutdown() {
                if (sampler != null) {
                    sampler.stop();
                }
            }
        };
    }
}
