package dev.sparkscope.annotator.core;

/**
 * The values of the status tag (and of sparkscope_stage_peaks' status
 * field): dashboards, alerts and the report select by these words, whichever
 * product wrote the point.
 */
public final class Status {

    public static final String RUNNING = "RUNNING";
    public static final String SUCCEEDED = "SUCCEEDED";
    public static final String FAILED = "FAILED";
    public static final String CANCELLED = "CANCELLED";
    public static final String FINISHED = "FINISHED";

    private Status() {
    }
}
