package dev.sparkscope.annotator;

import java.util.function.Consumer;
import java.util.function.Supplier;

/**
 * Turns the lifecycle of an application, its SQL queries, jobs, stages and
 * executors into line-protocol points, one per entity when it ends, stamped
 * with its start time so Grafana can draw it as a region (time .. end_time_ms).
 * With running points on, a point with status=RUNNING is also written when
 * the entity starts.
 *
 * <p>Takes plain values, not Spark classes, so it is tested without Spark.
 * Called from one thread (Spark's listener bus); not thread-safe.
 */
final class AnnotationRecorder {

    static final String APPLICATION = "sparkscope_application";
    static final String QUERY = "sparkscope_query";
    static final String JOB = "sparkscope_job";
    static final String STAGE = "sparkscope_stage";
    static final String EXECUTOR = "sparkscope_executor";

    static final String RUNNING = "RUNNING";
    static final String SUCCEEDED = "SUCCEEDED";
    static final String FAILED = "FAILED";
    static final String FINISHED = "FINISHED";

    /** Descriptions (often whole SQL texts) are cut here; InfluxDB allows 64 KB per string. */
    static final int MAX_DESCRIPTION = 2000;
    /** The one-line text shown on an annotation. */
    static final int MAX_TEXT_PART = 300;
    static final int MAX_OPEN_JOBS = 2000;
    static final int MAX_OPEN_QUERIES = 2000;

    private static final class OpenQuery {
        final long startMs;
        final String description;

        OpenQuery(long startMs, String description) {
            this.startMs = startMs;
            this.description = description;
        }
    }

    private static final class OpenJob {
        final long startMs;
        final String description;
        final String group;
        final Long executionId;

        OpenJob(long startMs, String description, String group, Long executionId) {
            this.startMs = startMs;
            this.description = description;
            this.group = group;
            this.executionId = executionId;
        }
    }

    private final Consumer<String> out;
    private final Supplier<String> applicationId;
    private final boolean runningPoints;
    private final StragglerRule straggler;
    private final int maxTrackedStages;
    private final Consumer<String> warnOnce;
    private boolean stageCapWarned;

    private final BoundedMap<Long, StageStats> stages;
    private final BoundedMap<Integer, OpenJob> jobs = new BoundedMap<>(MAX_OPEN_JOBS);
    private final BoundedMap<Long, OpenQuery> queries = new BoundedMap<>(MAX_OPEN_QUERIES);

    private Long appStartMs;
    private String appName;
    private String sparkUser;
    private String sparkVersion;

    AnnotationRecorder(Consumer<String> out, Supplier<String> applicationId, boolean runningPoints,
                       StragglerRule straggler, int maxTrackedStages, Consumer<String> warn) {
        this.out = out;
        this.applicationId = applicationId;
        this.runningPoints = runningPoints;
        this.straggler = straggler;
        this.maxTrackedStages = maxTrackedStages;
        this.stages = new BoundedMap<>(maxTrackedStages);
        this.warnOnce = warn;
    }

    // ---- application ----

    void applicationStarted(long timeMs, String name, String user, String version) {
        appStartMs = timeMs;
        appName = name;
        sparkUser = user;
        sparkVersion = version;
        if (runningPoints) {
            emit(point(APPLICATION, RUNNING, timeMs)
                    .field("app_name", name)
                    .field("spark_user", user)
                    .field("spark_version", version)
                    .field("text", "application " + oneLine(name) + " started"));
        }
    }

    void applicationEnded(long timeMs, Integer exitCode) {
        long start = appStartMs != null ? appStartMs : timeMs;
        Long duration = appStartMs != null ? timeMs - appStartMs : null;
        String text = "application " + oneLine(appName == null ? applicationId.get() : appName) + " finished"
                + (duration != null ? " after " + DurationText.of(duration) : "")
                + (exitCode != null && exitCode != 0 ? " with exit code " + exitCode : "");
        emit(point(APPLICATION, FINISHED, start)
                .field("app_name", appName)
                .field("spark_user", sparkUser)
                .field("spark_version", sparkVersion)
                .field("end_time_ms", timeMs)
                .field("duration_ms", duration)
                .field("exit_code", exitCode == null ? null : (long) exitCode)
                .field("text", text));
        stages.clear();
        jobs.clear();
        queries.clear();
    }

    // ---- SQL queries ----

    void queryStarted(long executionId, long timeMs, String description) {
        String desc = clip(description, MAX_DESCRIPTION);
        queries.put(executionId, new OpenQuery(timeMs, desc));
        if (runningPoints) {
            emit(point(QUERY, RUNNING, timeMs)
                    .tag("execution_id", Long.toString(executionId))
                    .field("description", desc)
                    .field("text", "query " + executionId + " running: " + oneLine(desc)));
        }
    }

    void queryEnded(long executionId, long timeMs, String error) {
        OpenQuery q = queries.remove(executionId);
        boolean failed = error != null && !error.trim().isEmpty();
        String status = failed ? FAILED : SUCCEEDED;
        long start = q != null ? q.startMs : timeMs;
        Long duration = q != null ? timeMs - q.startMs : null;
        String desc = q != null ? q.description : null;
        String text = "query " + executionId + (failed ? " FAILED" : "") + ": " + oneLine(desc)
                + (duration != null ? " (" + DurationText.of(duration) + ")" : "")
                + (failed ? ": " + oneLine(firstLine(error)) : "");
        emit(point(QUERY, status, start)
                .tag("execution_id", Long.toString(executionId))
                .field("description", desc)
                .field("end_time_ms", timeMs)
                .field("duration_ms", duration)
                .field("error", failed ? clip(error, MAX_DESCRIPTION) : null)
                .field("text", text));
    }

    // ---- jobs ----

    void jobStarted(int jobId, long timeMs, String description, String group, Long executionId) {
        String desc = clip(description, MAX_DESCRIPTION);
        jobs.put(jobId, new OpenJob(timeMs, desc, group, executionId));
        if (runningPoints) {
            emit(point(JOB, RUNNING, timeMs)
                    .tag("job_id", Integer.toString(jobId))
                    .tag("job_group", group)
                    .field("description", desc)
                    .field("execution_id", executionId)
                    .field("text", jobText(jobId, " running", group, desc, null, null)));
        }
    }

    void jobEnded(int jobId, long timeMs, boolean succeeded, String error) {
        OpenJob j = jobs.remove(jobId);
        long start = j != null ? j.startMs : timeMs;
        Long duration = j != null ? timeMs - j.startMs : null;
        String desc = j != null ? j.description : null;
        String group = j != null ? j.group : null;
        emit(point(JOB, succeeded ? SUCCEEDED : FAILED, start)
                .tag("job_id", Integer.toString(jobId))
                .tag("job_group", group)
                .field("description", desc)
                .field("execution_id", j != null ? j.executionId : null)
                .field("end_time_ms", timeMs)
                .field("duration_ms", duration)
                .field("error", succeeded ? null : clip(error, MAX_DESCRIPTION))
                .field("text", jobText(jobId, succeeded ? "" : " FAILED", group, desc, duration,
                        succeeded ? null : error)));
    }

    private static String jobText(int jobId, String state, String group, String desc, Long duration, String error) {
        return "job " + jobId + state
                + (group != null && !group.isEmpty() ? " [group " + oneLine(group) + "]" : "")
                + ": " + oneLine(desc)
                + (duration != null ? " (" + DurationText.of(duration) + ")" : "")
                + (error != null ? ": " + oneLine(firstLine(error)) : "");
    }

    // ---- stages ----

    void stageSubmitted(int stageId, int attempt, String name, int numTasks, long submittedMs) {
        long key = stageKey(stageId, attempt);
        if (stages.size() >= maxTrackedStages && !stages.containsKey(key) && !stageCapWarned) {
            stageCapWarned = true;
            warnOnce.accept("sparkscope annotator: more than " + maxTrackedStages
                    + " stages running at once; task statistics of the oldest are dropped (raise "
                    + AnnotatorConfig.MAX_TRACKED_STAGES + " if this is expected)");
        }
        stages.put(key, new StageStats(stageId, attempt, submittedMs));
        if (runningPoints) {
            emit(point(STAGE, RUNNING, submittedMs)
                    .tag("stage_id", Integer.toString(stageId))
                    .tag("attempt", Integer.toString(attempt))
                    .field("name", oneLine(name))
                    .field("num_tasks", (long) numTasks)
                    .field("text", "stage " + stageId + "." + attempt + " running: " + oneLine(name)
                            + " (" + numTasks + " tasks)"));
        }
    }

    void taskEnded(int stageId, int attempt, boolean successful, long durationMs, long gcMs,
                   long fetchWaitMs, String executorId, String host) {
        StageStats s = stages.get(stageKey(stageId, attempt));
        if (s == null) {
            return; // stage already completed (late speculative task) or evicted
        }
        if (successful) {
            s.recordTask(durationMs, gcMs, fetchWaitMs, executorId, host);
        } else {
            s.recordFailedTask();
        }
    }

    /**
     * @param submittedMs stage submission time, or null when Spark did not set it
     * @param completedMs stage completion time, or null when Spark did not set it
     */
    void stageCompleted(int stageId, int attempt, String name, int numTasks, Long submittedMs,
                        Long completedMs, String failureReason, long nowMs) {
        StageStats s = stages.remove(stageKey(stageId, attempt));
        if (s == null) {
            s = new StageStats(stageId, attempt, submittedMs != null ? submittedMs : nowMs);
        }
        long start = submittedMs != null ? submittedMs : s.submittedAtMs;
        long end = completedMs != null ? completedMs : nowMs;
        long duration = end - start;
        boolean failed = failureReason != null;
        boolean isStraggler = !failed && straggler.isStraggler(s);
        boolean haveTasks = s.taskCount() > 0;

        StringBuilder text = new StringBuilder();
        text.append("stage ").append(stageId).append('.').append(attempt)
                .append(failed ? " FAILED" : "").append(": ").append(oneLine(name))
                .append(" (").append(DurationText.of(duration)).append(", ").append(numTasks).append(" tasks");
        if (haveTasks) {
            text.append(", median task ").append(DurationText.of(s.p50Ms()));
        }
        text.append(')');
        if (failed) {
            text.append(": ").append(oneLine(firstLine(failureReason)));
        }
        if (isStraggler) {
            text.append("; STRAGGLER: slowest task ").append(DurationText.of(s.maxMs()))
                    .append(" = ").append(String.format(java.util.Locale.ROOT, "%.1f", s.skewRatio()))
                    .append("x the median, on executor ").append(s.slowestExecutor())
                    .append(" (host ").append(s.slowestHost()).append(')');
        }

        Point p = point(STAGE, failed ? FAILED : SUCCEEDED, start)
                .tag("stage_id", Integer.toString(stageId))
                .tag("attempt", Integer.toString(attempt))
                .tag("straggler", Boolean.toString(isStraggler))
                .field("name", oneLine(name))
                .field("num_tasks", (long) numTasks)
                .field("failure_reason", failed ? clip(failureReason, MAX_DESCRIPTION) : null)
                .field("end_time_ms", end)
                .field("duration_ms", duration)
                .field("task_count_seen", s.taskCount())
                .field("task_failed_count", s.failedTaskCount());
        if (haveTasks) {
            p.field("task_max_ms", s.maxMs())
                    .field("task_p50_ms", s.p50Ms())
                    .field("task_p75_ms", s.p75Ms())
                    .field("task_p95_ms", s.p95Ms())
                    .field("gc_max_ms", s.gcMaxMs())
                    .field("fetch_wait_max_ms", s.fetchWaitMaxMs())
                    .field("skew_ratio", Math.round(s.skewRatio() * 100) / 100.0)
                    .field("slowest_executor", s.slowestExecutor())
                    .field("slowest_host", s.slowestHost());
        }
        emit(p.field("text", text.toString()));
    }

    /** Stages whose task statistics are held right now (tests). */
    int trackedStages() {
        return stages.size();
    }

    // ---- executors ----

    void executorAdded(long timeMs, String executorId, String host, int cores) {
        emit(point(EXECUTOR, null, timeMs)
                .tag("executor_id", executorId)
                .tag("event", "added")
                .field("host", host)
                .field("cores", (long) cores)
                .field("text", "executor " + oneLine(executorId) + " added on " + oneLine(host)
                        + " (" + cores + " cores)"));
    }

    void executorRemoved(long timeMs, String executorId, String reason) {
        emit(point(EXECUTOR, null, timeMs)
                .tag("executor_id", executorId)
                .tag("event", "removed")
                .field("reason", clip(reason, MAX_DESCRIPTION))
                .field("text", "executor " + oneLine(executorId) + " removed"
                        + (reason != null && !reason.isEmpty() ? ": " + oneLine(reason) : "")));
    }

    // ---- helpers ----

    private Point point(String measurement, String status, long timeMs) {
        return Point.measurement(measurement)
                .tag("applicationid", applicationId.get())
                .tag("status", status)
                .timeMs(timeMs);
    }

    private void emit(Point p) {
        out.accept(p.toLine());
    }

    private static long stageKey(int stageId, int attempt) {
        return ((long) stageId << 32) | (attempt & 0xffffffffL);
    }

    /** Cuts to at most max chars without splitting a surrogate pair; null stays null. */
    static String clip(String s, int max) {
        if (s == null || s.length() <= max) {
            return s;
        }
        int end = max - 1;
        if (Character.isHighSurrogate(s.charAt(end - 1))) {
            end--;
        }
        return s.substring(0, end) + "…";
    }

    /** Error texts are often stack traces: the annotation's text shows their first line only. */
    static String firstLine(String s) {
        if (s == null) {
            return null;
        }
        String t = s.trim();
        int nl = t.indexOf('\n');
        return nl < 0 ? t : t.substring(0, nl);
    }

    /** Whitespace runs (line breaks included) become one space, cut for an annotation's text. */
    static String oneLine(String s) {
        if (s == null || s.isEmpty()) {
            return "(no description)";
        }
        return clip(s.trim().replaceAll("\\s+", " "), MAX_TEXT_PART);
    }
}
