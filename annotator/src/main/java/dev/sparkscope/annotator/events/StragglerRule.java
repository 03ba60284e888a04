package dev.sparkscope.annotator.events;

/**
 * When a stage counts as a straggler stage: its slowest task was far slower
 * than a typical one AND it made the stage end later.
 *
 * <p>Far slower: at least {@code minTasks} successful tasks, and the slowest
 * took at least {@code ratio} times the typical task and at least
 * {@code minExcessMs} longer. The typical task is the median, or for stages
 * of {@link #LARGE_STAGE_TASKS} tasks and more the 95th percentile: the
 * slowest of N tasks grows with N, so against the median a big stage of
 * uniform tasks would always look skewed. The ratio alone would flag stages
 * of 5 ms tasks with one 20 ms task; the excess alone, every long stage with
 * some spread.
 *
 * <p>Made the stage end later: the slowest task took at least half the
 * stage's duration, or it was among the last 5 % of tasks to finish and the
 * stage ended at least {@code minExcessMs} after 95 % of its tasks were
 * done. A slow task early in a multi-wave stage, while other slots kept
 * working through the rest, delays nothing and is not flagged.
 */
public final class StragglerRule {

    static final double DEFAULT_RATIO = 3.0;
    static final int DEFAULT_MIN_TASKS = 4;
    static final long DEFAULT_MIN_EXCESS_MS = 2000;
    static final int LARGE_STAGE_TASKS = 50;

    public final double ratio;
    public final int minTasks;
    public final long minExcessMs;

    StragglerRule(double ratio, int minTasks, long minExcessMs) {
        this.ratio = ratio;
        this.minTasks = minTasks;
        this.minExcessMs = minExcessMs;
    }

    static StragglerRule defaults() {
        return new StragglerRule(DEFAULT_RATIO, DEFAULT_MIN_TASKS, DEFAULT_MIN_EXCESS_MS);
    }

    /** The typical task the slowest is compared with. */
    static long typicalMs(StageStats stage) {
        return stage.taskCount() >= LARGE_STAGE_TASKS ? stage.p95Ms() : stage.p50Ms();
    }

    /** @param stageEndMs the stage's completion time (driver clock, as the tasks' finish times) */
    boolean isStraggler(StageStats stage, long stageEndMs) {
        StageStats.Task slowest = stage.slowest();
        if (stage.taskCount() < minTasks || slowest == null) {
            return false;
        }
        long max = stage.maxMs();
        long typical = typicalMs(stage);
        if (max < ratio * typical || max - typical < minExcessMs) {
            return false;
        }
        long duration = stageEndMs - stage.submittedAtMs;
        if (2 * max >= duration) {
            return true;
        }
        Long done95 = stage.finishOf95PercentMs();
        return done95 != null && slowest.finishMs >= done95 && stageEndMs - done95 >= minExcessMs;
    }
}
