package dev.sparkscope.annotator;

import dev.sparkscope.annotator.profiler.ProfilerDriverPlugin;
import dev.sparkscope.annotator.profiler.ProfilerExecutorPlugin;

import org.apache.spark.api.plugin.DriverPlugin;
import org.apache.spark.api.plugin.ExecutorPlugin;
import org.apache.spark.api.plugin.SparkPlugin;

/**
 * {@code spark.plugins=dev.sparkscope.annotator.ProfilerPlugin}: JVM flame
 * graphs of the executors with async-profiler, on demand
 * ({@code ./sparkscope profile}, through a control endpoint the driver opens
 * on 127.0.0.1) and optionally all the time at a low rate
 * ({@code spark.sparkscope.profiler.continuous=cpu}). Profiles are written to
 * the same Telegraf as the annotator's points. Nothing here can fail a job:
 * every error is logged and the plugin steps aside.
 */
public final class ProfilerPlugin implements SparkPlugin {

    @Override
    public DriverPlugin driverPlugin() {
        return new ProfilerDriverPlugin();
    }

    @Override
    public ExecutorPlugin executorPlugin() {
        return new ProfilerExecutorPlugin();
    }
}
