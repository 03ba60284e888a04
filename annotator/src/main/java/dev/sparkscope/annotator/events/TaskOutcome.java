package dev.sparkscope.annotator.events;

/**
 * How a task ended, from Spark's TaskEndReason. Only SUCCEEDED tasks feed
 * the duration statistics: a RESUBMITTED task-end carries the TaskInfo of a
 * task that had succeeded before its executor was lost (its map output went
 * with it), so counting it as a success would count that task twice; a
 * KILLED task is a losing speculative copy or a cancelled task, not a
 * failure of the application's code or data.
 */
public enum TaskOutcome {
    SUCCEEDED, FAILED, KILLED, RESUBMITTED;

    /** From the class of Spark's TaskEndReason (names are the same in Spark 3.5 and 4.x). */
    public static TaskOutcome fromReasonClass(String className) {
        if (className == null) {
            return FAILED;
        }
        switch (className) {
            case "org.apache.spark.Success$":
                return SUCCEEDED;
            case "org.apache.spark.Resubmitted$":
                return RESUBMITTED;
            case "org.apache.spark.TaskKilled":
            case "org.apache.spark.TaskCommitDenied":
                return KILLED;
            default:
                return FAILED;
        }
    }
}
