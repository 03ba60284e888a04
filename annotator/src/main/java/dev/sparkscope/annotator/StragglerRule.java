package dev.sparkscope.annotator;

/**
 * When a stage counts as a straggler: it ran at least {@code minTasks}
 * successful tasks, and its slowest task took at least {@code ratio} times
 * the median task and at least {@code minExcessMs} longer than it. The ratio
 * alone would flag stages of 5 ms tasks with one 20 ms task; the excess
 * alone would flag every long stage with some spread.
 */
final class StragglerRule {

    static final double DEFAULT_RATIO = 3.0;
    static final int DEFAULT_MIN_TASKS = 4;
    static final long DEFAULT_MIN_EXCESS_MS = 2000;

    final double ratio;
    final int minTasks;
    final long minExcessMs;

    StragglerRule(double ratio, int minTasks, long minExcessMs) {
        this.ratio = ratio;
        this.minTasks = minTasks;
        this.minExcessMs = minExcessMs;
    }

    static StragglerRule defaults() {
        return new StragglerRule(DEFAULT_RATIO, DEFAULT_MIN_TASKS, DEFAULT_MIN_EXCESS_MS);
    }

    boolean isStraggler(StageStats stage) {
        if (stage.taskCount() < minTasks) {
            return false;
        }
        long max = stage.maxMs();
        long median = stage.p50Ms();
        return max >= ratio * median && max - median >= minExcessMs;
    }
}
