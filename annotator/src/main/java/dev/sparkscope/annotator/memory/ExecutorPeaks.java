package dev.sparkscope.annotator.memory;

import dev.sparkscope.annotator.core.BoundedMap;
import dev.sparkscope.annotator.core.Point;
import dev.sparkscope.annotator.core.ProcessTreePeaks;
import dev.sparkscope.annotator.core.Schema;
import dev.sparkscope.annotator.core.Text;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Consumer;
import java.util.function.Supplier;

/**
 * The highest value of every executor memory metric, per executor and per
 * stage, as Spark itself tracks them: each heartbeat carries, per running
 * stage, the peaks the executor polled since the last heartbeat (polled every
 * {@code spark.executor.metrics.pollingInterval}), and each task end carries
 * the peaks polled while that task ran. Keeping the maximum of those gives
 * the same numbers as Spark's REST API ({@code peakMemoryMetrics}), and none
 * of the short peaks that a 5 s Graphite sample misses.
 *
 * <p>Written as three measurements, with {@code applicationid} the only tag
 * (ids are fields, so series do not grow with stages or executors):
 * <ul>
 *   <li>{@value #EXECUTOR_PEAKS}: one point per executor when it is removed,
 *       and for those still alive at application end;</li>
 *   <li>{@value #STAGE_PEAKS}: one point per stage attempt at its end, each
 *       metric the highest over the executors that ran it;</li>
 *   <li>{@value #STAGE_EXECUTOR_PEAKS}: one point per stage attempt and
 *       executor at the stage's end.</li>
 * </ul>
 * Points of one measurement share a series, so each gets a time strictly
 * after the previous one's (the event's millisecond, moved on by a
 * millisecond when taken): none overwrites another.
 *
 * <p>The process tree's resident memory (ProcessTree*RSSMemory) comes from
 * Spark's ExecutorMetrics when Spark's own process-tree metrics are on, and
 * from the annotator's fork-free sampler ({@link ProcessTreePeaks}) when they
 * are off (the shipped setting; Spark then reports 0): each heartbeat takes
 * the sampler's highest sizes since the previous one for the stages it
 * reports, a task end the sizes so far in that window, and an executor's
 * peaks the highest over its whole run.
 *
 * <p>Takes plain values, not Spark classes (see {@link ExecutorPeakEvents}),
 * so it is tested without Spark. Called from one thread; not thread-safe.
 */
public final class ExecutorPeaks {

    static final String EXECUTOR_PEAKS = Schema.ExecutorPeaks.NAME;
    static final String STAGE_PEAKS = Schema.StagePeaks.NAME;
    static final String STAGE_EXECUTOR_PEAKS = Schema.StageExecutorPeaks.NAME;
    public static final String MEMORY_CONF = Schema.MemoryConf.NAME;

    /**
     * The settings that size memory, written once at application start so that
     * advice can be given against what the run had (as set; unset ones are
     * left out and Spark's defaults apply).
     */
    static final List<String> MEMORY_SETTINGS = Schema.MEMORY_SETTINGS;

    /**
     * Not one of Spark's ExecutorMetricType: the highest
     * {@code TaskMetrics.peakExecutionMemory} of any one task (on an executor,
     * or in a stage). Spark's memory consumers (aggregation maps, sorters,
     * joins) count it as they acquire memory, so it is exact, where the
     * polled OnHeapExecutionMemory misses what a task held between two polls:
     * a hash aggregation that grows until its task ends peaked at 354 MiB per
     * task while every 2 s poll saw at most 256 MiB (docs/memory.md).
     */
    static final String TASK_PEAK_EXECUTION = Schema.ExecutorMetric.TASK_PEAK_EXECUTION_MEMORY;

    /** Every field a peaks array holds: Spark's METRICS, then TASK_PEAK_EXECUTION (as schema.py lists them). */
    static final List<String> FIELDS = Schema.EXECUTOR_METRICS;

    /**
     * Spark's ExecutorMetricType names, written as field names unchanged (as
     * in the REST API): every field but TASK_PEAK_EXECUTION. A name this Spark
     * version does not know is skipped.
     */
    static final List<String> METRICS;

    static {
        List<String> metrics = new ArrayList<>(FIELDS);
        metrics.remove(TASK_PEAK_EXECUTION);
        METRICS = Collections.unmodifiableList(metrics);
    }

    static final int TASK_EXECUTION = FIELDS.indexOf(TASK_PEAK_EXECUTION);

    /** A metric this Spark version does not report. */
    static final long MISSING = Long.MIN_VALUE;

    static final int MAX_EXECUTORS = 10_000;
    static final int MAX_STAGES = 1_000;

    private static final int HEAP = METRICS.indexOf(Schema.ExecutorMetric.JVM_HEAP_MEMORY);
    private static final int EXECUTION = METRICS.indexOf(Schema.ExecutorMetric.ON_HEAP_EXECUTION_MEMORY);
    private static final int JVM_RSS = METRICS.indexOf(Schema.ExecutorMetric.PROCESS_TREE_JVMRSS_MEMORY);
    /** Where each of ProcessTreePeaks' sizes (JVM, Python, other) goes in a peaks array. */
    private static final int[] TREE = {JVM_RSS, METRICS.indexOf(Schema.ExecutorMetric.PROCESS_TREE_PYTHON_RSS_MEMORY),
        METRICS.indexOf(Schema.ExecutorMetric.PROCESS_TREE_OTHER_RSS_MEMORY)};

    private static final class StagePeaks {
        final Long executionId;
        final Map<String, long[]> byExecutor = new LinkedHashMap<>();

        StagePeaks(Long executionId) {
            this.executionId = executionId;
        }
    }

    private final Consumer<String> out;
    private final Supplier<String> applicationId;
    private final BoundedMap<String, long[]> executors = new BoundedMap<>(MAX_EXECUTORS);
    private final BoundedMap<Long, StagePeaks> stages = new BoundedMap<>(MAX_STAGES);
    private final Map<String, Long> lastStamp = new HashMap<>();
    private final ProcessTreePeaks tree;

    public ExecutorPeaks(Consumer<String> out, Supplier<String> applicationId) {
        this(out, applicationId, ProcessTreePeaks.jvmWide());
    }

    ExecutorPeaks(Consumer<String> out, Supplier<String> applicationId, ProcessTreePeaks tree) {
        this.out = out;
        this.applicationId = applicationId;
        this.tree = tree;
    }

    /**
     * The sampler's highest sizes for an executor since the last heartbeat
     * (take: a heartbeat, which starts a new window) or so far in that window
     * (a task end); null when the sampler sent nothing (it is off, or Spark's
     * own process-tree metrics are on).
     */
    long[] treeWindow(String executorId, boolean take) {
        return executorId == null ? null : take ? tree.takeWindow(executorId) : tree.peekWindow(executorId);
    }

    /** values raised to the sampler's sizes (from treeWindow; null leaves them). */
    static long[] withTree(long[] values, long[] sizes) {
        if (sizes != null && values != null && values.length == FIELDS.size()) {
            for (int i = 0; i < TREE.length; i++) {
                if (TREE[i] >= 0 && sizes[i] > values[TREE[i]]) {
                    values[TREE[i]] = sizes[i];
                }
            }
        }
        return values;
    }

    static long[] emptyPeaks() {
        long[] v = new long[FIELDS.size()];
        Arrays.fill(v, MISSING);
        return v;
    }

    void applicationStarted(long timeMs, java.util.function.Function<String, String> conf) {
        Point p = point(MEMORY_CONF, timeMs);
        int set = 0;
        for (int i = 0; i < MEMORY_SETTINGS.size(); i++) {
            String value = conf.apply(MEMORY_SETTINGS.get(i));
            if (value != null) {
                p.field(Schema.MEMORY_SETTINGS.get(i), value);
                set++;
            }
        }
        p.field(Schema.MemoryConf.SETTINGS_SET, (long) set);
        emit(p);
    }

    void stageSubmitted(int stageId, int attempt, Long executionId) {
        stages.put(stageKey(stageId, attempt), new StagePeaks(executionId));
    }

    /**
     * Peaks of one executor, from a heartbeat (for one stage; stageId -1 when
     * they belong to no stage, as the driver's own) or a task end: an array
     * of {@link #FIELDS} (from {@link #emptyPeaks()}), MISSING where unknown.
     */
    void update(String executorId, int stageId, int attempt, long[] values) {
        if (executorId == null || values == null || values.length != FIELDS.size()) {
            return;
        }
        raise(executors.computeIfAbsent(executorId, k -> emptyPeaks()), values);
        if (stageId >= 0) {
            StagePeaks s = stages.get(stageKey(stageId, attempt));
            if (s != null) {
                raise(s.byExecutor.computeIfAbsent(executorId, k -> emptyPeaks()), values);
            }
        }
    }

    void stageCompleted(int stageId, int attempt, String name, String status, long timeMs) {
        StagePeaks s = stages.remove(stageKey(stageId, attempt));
        if (s == null || s.byExecutor.isEmpty()) {
            return; // no heartbeat or task end reported metrics for it
        }
        long[] max = emptyPeaks();
        String heapExecutor = null;
        String executionExecutor = null;
        long heap = MISSING;
        long execution = MISSING;
        for (Map.Entry<String, long[]> e : s.byExecutor.entrySet()) {
            long[] v = e.getValue();
            raise(max, v);
            if (v[HEAP] > heap) {
                heap = v[HEAP];
                heapExecutor = e.getKey();
            }
            if (v[EXECUTION] > execution) {
                execution = v[EXECUTION];
                executionExecutor = e.getKey();
            }
            emit(metrics(point(STAGE_EXECUTOR_PEAKS, timeMs), v)
                    .field(Schema.StageExecutorPeaks.STAGE_ID, (long) stageId)
                    .field(Schema.StageExecutorPeaks.ATTEMPT, (long) attempt)
                    .field(Schema.StageExecutorPeaks.EXECUTOR_ID, e.getKey())
                    .field(Schema.StageExecutorPeaks.EXECUTION_ID, s.executionId));
        }
        emit(metrics(point(STAGE_PEAKS, timeMs), max)
                .field(Schema.StagePeaks.STAGE_ID, (long) stageId)
                .field(Schema.StagePeaks.ATTEMPT, (long) attempt)
                .field(Schema.StagePeaks.NAME_FIELD, Text.oneLine(name))
                .field(Schema.StagePeaks.STATUS, status)
                .field(Schema.StagePeaks.EXECUTION_ID, s.executionId)
                .field(Schema.StagePeaks.EXECUTORS, (long) s.byExecutor.size())
                .field(Schema.StagePeaks.HEAP_PEAK_EXECUTOR, heapExecutor)
                .field(Schema.StagePeaks.EXECUTION_PEAK_EXECUTOR, executionExecutor)
                .field(Schema.StagePeaks.TEXT, "stage " + stageId + "." + attempt + " peaks: heap "
                        + bytes(max[HEAP]) + ", execution " + bytes(max[EXECUTION]) + ", one task's execution "
                        + bytes(max[TASK_EXECUTION]) + ", JVM RSS "
                        + bytes(max[JVM_RSS]) + " (highest of " + s.byExecutor.size() + " executors)"));
    }

    void executorRemoved(String executorId, long timeMs) {
        long[] v = executors.remove(executorId);
        if (v != null) {
            emitExecutor(executorId, v, "removed", timeMs);
        }
    }

    /** Every executor still alive, then forgets everything. */
    void applicationEnded(long timeMs) {
        List<Map.Entry<String, long[]>> alive = new ArrayList<>(executors.entrySet());
        for (Map.Entry<String, long[]> e : alive) {
            emitExecutor(e.getKey(), e.getValue(), "application end", timeMs);
        }
        executors.clear();
        stages.clear();
    }

    private void emitExecutor(String executorId, long[] v, String when, long timeMs) {
        withTree(v, tree.run(executorId));
        tree.forget(executorId);
        emit(metrics(point(EXECUTOR_PEAKS, timeMs), v)
                .field(Schema.ExecutorPeaks.EXECUTOR_ID, executorId)
                .field(Schema.ExecutorPeaks.WRITTEN_AT, when)
                .field(Schema.ExecutorPeaks.TEXT, "executor " + Text.oneLine(executorId) + " peaks: heap "
                        + bytes(v[HEAP]) + ", execution " + bytes(v[EXECUTION]) + ", JVM RSS " + bytes(v[JVM_RSS])));
    }

    private Point point(String measurement, long timeMs) {
        Long last = lastStamp.get(measurement);
        long t = last != null && timeMs <= last ? last + 1 : timeMs;
        lastStamp.put(measurement, t);
        return Point.measurement(measurement).tag(Schema.APPLICATION, applicationId.get()).timeMs(t);
    }

    private static Point metrics(Point p, long[] v) {
        for (int i = 0; i < v.length; i++) {
            if (v[i] != MISSING) {
                p.field(Schema.EXECUTOR_METRICS.get(i), v[i]);
            }
        }
        return p;
    }

    private void emit(Point p) {
        out.accept(p.toLine());
    }

    private static void raise(long[] peaks, long[] values) {
        for (int i = 0; i < peaks.length; i++) {
            if (values[i] > peaks[i]) {
                peaks[i] = values[i];
            }
        }
    }

    private static long stageKey(int stageId, int attempt) {
        return ((long) stageId << 32) | (attempt & 0xffffffffL);
    }

    private static String bytes(long b) {
        if (b == MISSING) {
            return "n/a";
        }
        return String.format(java.util.Locale.ROOT, "%.1f MiB", b / 1048576.0);
    }

    /** Stages whose peaks are held right now (tests). */
    int trackedStages() {
        return stages.size();
    }
}
