package dev.sparkscope.annotator.memory;

import dev.sparkscope.annotator.core.Point;
import dev.sparkscope.annotator.core.Schema;

import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.function.Consumer;
import java.util.function.Supplier;

/**
 * The application's task time by component, as one running total per
 * component: the sum over every executor of the counters Spark's
 * ExecutorSource keeps ({@code runTime.count}, {@code cpuTime.count}, ...),
 * from the task ends the driver sees. The live dashboard's "Task time by
 * component" reads these when every executor is picked: one series per
 * component instead of one per executor (at 500 executors over 6 hours, 6
 * series instead of 3,000; docs/performance.md).
 *
 * <p>Counted as the executors count: ExecutorSource adds a task's metrics
 * only when it succeeded, so only successful task ends are added here, in the
 * same units (run, GC, deserialize and fetch wait in milliseconds, CPU and
 * shuffle write in nanoseconds). Written as measurement
 * {@value #PREFIX}{@code <counter>}, tag {@code applicationid}, float field
 * {@code value} (as Telegraf stores Graphite values, so that the rollups'
 * continuous queries and the same panel query read both), one point per
 * counter at most every {@link #PERIOD_MS} ms while events arrive (the
 * driver's own heartbeat is one every spark.executor.heartbeatInterval, so an
 * idle application still gets its flat line), and a last one at application
 * end. The series never grow with executors, stages or time.
 *
 * <p>Takes plain values, not Spark classes, so it is tested without Spark.
 * Called from the listener bus thread only; not thread-safe.
 */
public final class TaskTimeTotals {

    public static final String PREFIX = Schema.TaskTotals.PREFIX;

    /** ExecutorSource's counter names as Telegraf stores them, in the order of {@link #taskSucceeded}'s arguments. */
    public static final List<String> COUNTERS = Schema.TASK_TIME_COUNTERS;

    /** As the Graphite sink's period in spark-conf/metrics.properties. */
    static final long PERIOD_MS = 5_000;

    private final Consumer<String> out;
    private final Supplier<String> applicationId;
    // Doubles: a long of nanoseconds overflows after about three months of
    // 2,000 busy task slots; a double is exact to 2^53 (104 days of one slot's
    // CPU in ns) and, beyond, off by a microsecond at most per task added.
    private final double[] totals = new double[COUNTERS.size()];
    private long lastWrittenMs = Long.MIN_VALUE;
    private boolean ended;

    public TaskTimeTotals(Consumer<String> out, Supplier<String> applicationId) {
        this.out = out;
        this.applicationId = applicationId;
    }

    /** A successful task's metrics (negative values, which Spark never sends, count as 0). */
    public void taskSucceeded(long runMs, long cpuNs, long gcMs, long deserializeMs, long fetchWaitMs,
                              long shuffleWriteNs) {
        long[] v = {runMs, cpuNs, gcMs, deserializeMs, fetchWaitMs, shuffleWriteNs};
        for (int i = 0; i < v.length; i++) {
            totals[i] += Math.max(0, v[i]);
        }
    }

    /** Any event: writes the totals when the last write is a period old (or there was none). */
    public void tick(long nowMs) {
        if (!ended && (lastWrittenMs == Long.MIN_VALUE || nowMs - lastWrittenMs >= PERIOD_MS)) {
            write(nowMs);
        }
    }

    /** The last point, with every task that ended before the application did; nothing after it. */
    public void applicationEnded(long nowMs) {
        if (!ended) {
            write(nowMs);
            ended = true;
        }
    }

    private void write(long nowMs) {
        // Strictly after the previous point: the same time would overwrite it.
        long t = lastWrittenMs != Long.MIN_VALUE && nowMs <= lastWrittenMs ? lastWrittenMs + 1 : nowMs;
        lastWrittenMs = t;
        String app = applicationId.get();
        for (int i = 0; i < totals.length; i++) {
            out.accept(Point.measurement(Schema.TaskTotals.NAMES.get(i)).tag(Schema.APPLICATION, app)
                    .wholeFloatField(Schema.TaskTotals.VALUE, totals[i]).timeMs(t).toLine());
        }
    }

    /** The running total of one of {@link #COUNTERS} (tests). */
    double total(String counter) {
        return totals[COUNTERS.indexOf(counter)];
    }
}
