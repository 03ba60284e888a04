package dev.sparkscope.annotator.core;


/**
 * The process tree's resident memory as the proctree sampler measured it, per
 * executor, for the driver's memory peaks: where Spark's own process-tree
 * metrics are off (they fork {@code pgrep} per process at every poll), the
 * sampler in each JVM polls /proc itself and its readings reach the driver
 * (the executors' through the plugin's RPC, the driver's own directly). The
 * memory peaks take from here what Spark's ExecutorMetrics no longer carry.
 *
 * <p>One per JVM, like {@link SharedWriter}: it is how two products of the jar
 * (the sampler and the peaks) meet in the driver without knowing each other.
 * Each executor holds two maxima of the three sizes ({@link #JVM},
 * {@link #PYTHON}, {@link #OTHER}): over the whole run, and over the window
 * since the peaks last took it (one heartbeat's worth, for the stages then
 * running). Bounded by {@link #MAX_EXECUTORS}. Thread-safe.
 */
public final class ProcessTreePeaks {

    public static final int JVM = 0;
    public static final int PYTHON = 1;
    public static final int OTHER = 2;
    public static final int SIZES = 3;
    static final int MAX_EXECUTORS = 10_000;

    private static final ProcessTreePeaks JVM_WIDE = new ProcessTreePeaks();

    private static final class Maxima {
        final long[] run = {-1, -1, -1};
        long[] window;
        long[] last;
    }

    private final BoundedMap<String, Maxima> byExecutor = new BoundedMap<>(MAX_EXECUTORS);

    /** This JVM's: the one the sampler offers to and the driver's peaks read. */
    public static ProcessTreePeaks jvmWide() {
        return JVM_WIDE;
    }

    /** A private one (tests). */
    public static ProcessTreePeaks forTests() {
        return new ProcessTreePeaks();
    }

    /** The highest sizes seen by one sampler since it last offered (bytes; negative: unknown). */
    public synchronized void offer(String executorId, long[] sizes) {
        if (executorId == null || sizes == null || sizes.length != SIZES) {
            return;
        }
        Maxima m = byExecutor.computeIfAbsent(executorId, k -> new Maxima());
        if (m.window == null) {
            m.window = new long[] {-1, -1, -1};
        }
        raise(m.run, sizes);
        raise(m.window, sizes);
        m.last = sizes.clone();
    }

    /**
     * The window's maxima since the last take, then a new window. When nothing
     * came since (the sampler sends at each new high and once a heartbeat
     * interval), the last sizes it sent: the level the tree is at, as a poll of
     * Spark's would see it. Null for an executor no sampler reported.
     */
    public synchronized long[] takeWindow(String executorId) {
        Maxima m = byExecutor.get(executorId);
        if (m == null) {
            return null;
        }
        long[] w = m.window != null ? m.window : m.last.clone();
        m.window = null;
        return w;
    }

    /** As takeWindow, the window left in place. */
    public synchronized long[] peekWindow(String executorId) {
        Maxima m = byExecutor.get(executorId);
        if (m == null) {
            return null;
        }
        return m.window != null ? m.window.clone() : m.last.clone();
    }

    /** The maxima over the whole run; null for an executor no sampler reported. */
    public synchronized long[] run(String executorId) {
        Maxima m = byExecutor.get(executorId);
        return m == null ? null : m.run.clone();
    }

    /** Forgets an executor whose peaks were written. */
    public synchronized void forget(String executorId) {
        byExecutor.remove(executorId);
    }

    private static void raise(long[] max, long[] values) {
        for (int i = 0; i < SIZES; i++) {
            if (values[i] > max[i]) {
                max[i] = values[i];
            }
        }
    }
}
