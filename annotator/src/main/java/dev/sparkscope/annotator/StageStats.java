package dev.sparkscope.annotator;

/**
 * Task statistics of one stage attempt, fed from task-end events. Its size
 * does not grow with the number of tasks: durations go to a bounded
 * {@link DurationHistogram}, everything else is a running maximum.
 */
final class StageStats {

    final int stageId;
    final int attempt;
    final long submittedAtMs;

    private final DurationHistogram durations = new DurationHistogram();
    private long failedTasks;
    private long slowestMs = -1;
    private String slowestExecutor;
    private String slowestHost;
    private long gcMaxMs;
    private long fetchWaitMaxMs;

    StageStats(int stageId, int attempt, long submittedAtMs) {
        this.stageId = stageId;
        this.attempt = attempt;
        this.submittedAtMs = submittedAtMs;
    }

    /** A task that finished successfully: it counts in the duration distribution. */
    void recordTask(long durationMs, long gcMs, long fetchWaitMs, String executorId, String host) {
        durations.record(durationMs);
        if (durationMs > slowestMs) {
            slowestMs = durationMs;
            slowestExecutor = executorId;
            slowestHost = host;
        }
        gcMaxMs = Math.max(gcMaxMs, gcMs);
        fetchWaitMaxMs = Math.max(fetchWaitMaxMs, fetchWaitMs);
    }

    /** A failed or killed task: counted, but kept out of the distribution. */
    void recordFailedTask() {
        failedTasks++;
    }

    long taskCount() {
        return durations.count();
    }

    long failedTaskCount() {
        return failedTasks;
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

    long gcMaxMs() {
        return gcMaxMs;
    }

    long fetchWaitMaxMs() {
        return fetchWaitMaxMs;
    }

    /** max / median; a median of 0 ms counts as 1 ms so the ratio stays finite. */
    double skewRatio() {
        if (taskCount() == 0) {
            return 0.0;
        }
        return (double) maxMs() / Math.max(1L, p50Ms());
    }

    String slowestExecutor() {
        return slowestExecutor;
    }

    String slowestHost() {
        return slowestHost;
    }

    int allocatedBytes() {
        return durations.allocatedBytes();
    }
}
