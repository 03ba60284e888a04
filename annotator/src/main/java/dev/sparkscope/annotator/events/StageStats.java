package dev.sparkscope.annotator.events;

/**
 * Task statistics of one stage attempt, fed from task-end events, and what
 * the annotation says about the stage (its name and the job it belongs to).
 * Its size does not grow with the number of tasks: durations go to a bounded
 * {@link DurationHistogram}, everything else is a counter, a sum or the
 * details of the one slowest task.
 */
public final class StageStats {

    /** What is known of one task when it ends; the recorder fills one per event. */
    public static final class Task {
        public long durationMs;
        public long finishMs;
        public int partition = -1;
        public String executorId;
        public String host;
        public long inputBytes;
        public long shuffleReadBytes;
        public long gcMs;
        public long fetchWaitMs;

        Task copy() {
            Task t = new Task();
            t.durationMs = durationMs;
            t.finishMs = finishMs;
            t.partition = partition;
            t.executorId = executorId;
            t.host = host;
            t.inputBytes = inputBytes;
            t.shuffleReadBytes = shuffleReadBytes;
            t.gcMs = gcMs;
            t.fetchWaitMs = fetchWaitMs;
            return t;
        }
    }

    final int stageId;
    final int attempt;
    final long submittedAtMs;
    final String name;
    final int numTasks;
    final Integer jobId;
    final String jobName;
    final Long executionId;

    private final DurationHistogram durations = new DurationHistogram();
    /** Successes needed for 95 % of the stage's tasks (at least 1). */
    private final long successesFor95;
    private long failedTasks;
    private long killedTasks;
    private long resubmittedTasks;
    private long inputBytesSum;
    private long shuffleReadBytesSum;
    private Task slowest;
    private long finishOf95PercentMs = -1;

    StageStats(int stageId, int attempt, long submittedAtMs, String name, int numTasks,
               Integer jobId, String jobName, Long executionId) {
        this.stageId = stageId;
        this.attempt = attempt;
        this.submittedAtMs = submittedAtMs;
        this.name = name;
        this.numTasks = numTasks;
        this.jobId = jobId;
        this.jobName = jobName;
        this.executionId = executionId;
        this.successesFor95 = Math.max(1, (long) Math.ceil(0.95 * numTasks));
    }

    StageStats(int stageId, int attempt, long submittedAtMs) {
        this(stageId, attempt, submittedAtMs, null, 0, null, null, null);
    }

    void record(TaskOutcome outcome, Task task) {
        switch (outcome) {
            case SUCCEEDED:
                recordSuccess(task);
                break;
            case KILLED:
                killedTasks++;
                break;
            case RESUBMITTED:
                resubmittedTasks++;
                break;
            default:
                failedTasks++;
        }
    }

    /** A task that finished successfully: it counts in the duration distribution. */
    private void recordSuccess(Task task) {
        durations.record(task.durationMs);
        inputBytesSum += Math.max(0, task.inputBytes);
        shuffleReadBytesSum += Math.max(0, task.shuffleReadBytes);
        if (slowest == null || task.durationMs > slowest.durationMs) {
            slowest = task.copy();
        }
        // Task ends reach the bus in the order the driver saw them finish, so
        // the k-th success is when 95 % of the stage's tasks were done.
        if (durations.count() == successesFor95) {
            finishOf95PercentMs = task.finishMs;
        }
    }

    long taskCount() {
        return durations.count();
    }

    long failedTaskCount() {
        return failedTasks;
    }

    long killedTaskCount() {
        return killedTasks;
    }

    long resubmittedTaskCount() {
        return resubmittedTasks;
    }

    long maxMs() {
        return durations.max();
    }

    long p50Ms() {
        return durations.percentile(0.50);
    }

    long p75Ms() {
        return durations.percentile(0.75);
    }

    long p95Ms() {
        return durations.percentile(0.95);
    }

    /** max / median; a median of 0 ms counts as 1 ms so the ratio stays finite. */
    double skewRatio() {
        if (taskCount() == 0) {
            return 0.0;
        }
        return (double) maxMs() / Math.max(1L, p50Ms());
    }

    /** The slowest successful task, or null before the first one. */
    Task slowest() {
        return slowest;
    }

    double meanInputBytes() {
        return taskCount() == 0 ? 0 : (double) inputBytesSum / taskCount();
    }

    double meanShuffleReadBytes() {
        return taskCount() == 0 ? 0 : (double) shuffleReadBytesSum / taskCount();
    }

    /** When 95 % of the stage's tasks had succeeded (driver time, ms), or null if they never did. */
    Long finishOf95PercentMs() {
        return finishOf95PercentMs < 0 ? null : finishOf95PercentMs;
    }

    int allocatedBytes() {
        return durations.allocatedBytes();
    }
}
