package dev.sparkscope.annotator;

import dev.sparkscope.annotator.core.AnnotatorLog;

import java.util.Collection;
import java.util.Collections;
import java.util.Map;
import java.util.function.Consumer;
import java.util.function.Function;
import java.util.function.Supplier;

import org.apache.spark.SparkConf;
import org.apache.spark.SparkContext;
import org.apache.spark.api.plugin.DriverPlugin;
import org.apache.spark.api.plugin.ExecutorPlugin;
import org.apache.spark.api.plugin.PluginContext;
import org.apache.spark.api.plugin.SparkPlugin;
import org.apache.spark.scheduler.SparkListenerInterface;

/**
 * {@code spark.plugins=dev.sparkscope.annotator.ListenerPlugin}: attaches the
 * {@link AnnotatorListener} to Spark's {@code appStatus} listener queue, the
 * one Spark's own UI listeners run on, instead of a queue of its own.
 *
 * <p>Why: a listener named in {@code spark.extraListeners} gets Spark's
 * {@code shared} queue, a thread that plain Spark does not start, woken for
 * every event. Measured on a job of 3,000 tasks (driver thread CPU by name,
 * ThreadMXBean): a listener that does nothing costs 110-140 ms of that thread
 * a run, the annotator 200 ms; on the status queue, which wakes for every
 * event anyway, that fixed part is gone. The annotator takes under a
 * microsecond an event once warm, against 4-20 for Spark's AppStatusListener
 * beside it, and writes through its own queue and thread, so the UI's queue
 * does not wait on the network.
 *
 * <p>The queue is chosen through {@code LiveListenerBus.addToStatusQueue},
 * which Scala declares {@code private[spark]} (public to the JVM; present from
 * Spark 2.3 to 4.x). Where it is missing, the listener goes to the shared
 * queue through the public {@code addSparkListener}, as
 * {@code spark.extraListeners} would, and says so once. When
 * {@code spark.extraListeners} already names the annotator (attached the older
 * way), this plugin adds nothing: one listener, never two.
 */
public final class ListenerPlugin implements SparkPlugin {

    static final String EXTRA_LISTENERS = "spark.extraListeners";

    @Override
    public DriverPlugin driverPlugin() {
        return new DriverPlugin() {
            private AnnotatorListener listener;

            @Override
            public Map<String, String> init(SparkContext sc, PluginContext ctx) {
                try {
                    SparkConf conf = ctx.conf(); // the context's own conf: spark.app.id appears in it later
                    listener = attach(key -> conf.get(key, null), () -> AnnotatorListener.keysOf(conf),
                            l -> sc.listenerBus().addToStatusQueue(l), sc::addSparkListener);
                } catch (Throwable t) {
                    AnnotatorListener.rethrowIfFatal(t);
                    AnnotatorLog.warn("sparkscope annotator: not attached (" + t + "); Spark runs normally");
                }
                return Collections.emptyMap();
            }

            /**
             * After the listener bus stopped (every event delivered): closes the
             * listener's writer if the application's end never reached it, as
             * when the SparkContext failed to start after this plugin did.
             */
            @Override
            public void shutdown() {
                if (listener != null && listener.close()) {
                    AnnotatorLog.info("sparkscope annotator: stopped without the application's end");
                }
            }
        };
    }

    /** The listener lives in the driver only. */
    @Override
    public ExecutorPlugin executorPlugin() {
        return null;
    }

    /**
     * Makes the listener and adds it to the status queue, or to the shared
     * queue when this Spark has no status queue to offer. Returns the listener
     * (null when spark.extraListeners attaches it already).
     */
    static AnnotatorListener attach(Function<String, String> conf, Supplier<Collection<String>> keys,
                                    Consumer<SparkListenerInterface> statusQueue,
                                    Consumer<SparkListenerInterface> sharedQueue) {
        if (namesAnnotator(conf.apply(EXTRA_LISTENERS))) {
            AnnotatorLog.info("sparkscope annotator: attached by " + EXTRA_LISTENERS + " (Spark's shared queue); "
                    + "drop it from there to run on the status queue");
            return null;
        }
        AnnotatorListener listener = new AnnotatorListener(conf, keys);
        try {
            statusQueue.accept(listener);
        } catch (LinkageError e) {
            AnnotatorLog.info("sparkscope annotator: this Spark has no status queue to join (" + e
                    + "); on the shared queue instead");
            sharedQueue.accept(listener);
        }
        return listener;
    }

    static boolean namesAnnotator(String extraListeners) {
        if (extraListeners == null) {
            return false;
        }
        for (String name : extraListeners.split(",")) {
            if (name.trim().equals(AnnotatorListener.class.getName())) {
                return true;
            }
        }
        return false;
    }
}
