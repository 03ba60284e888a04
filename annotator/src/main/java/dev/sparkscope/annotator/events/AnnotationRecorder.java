package dev.sparkscope.annotator.events;

import dev.sparkscope.annotator.core.BoundedMap;
import dev.sparkscope.annotator.core.DurationText;
import dev.sparkscope.annotator.core.Point;
import dev.sparkscope.annotator.core.Schema;
import static dev.sparkscope.annotator.core.Stamps.stamp;
import static dev.sparkscope.annotator.core.Status.CANCELLED;
import static dev.sparkscope.annotator.core.Status.FAILED;
import static dev.sparkscope.annotator.core.Status.FINISHED;
import static dev.sparkscope.annotator.core.Status.RUNNING;
import static dev.sparkscope.annotator.core.Status.SUCCEEDED;
import static dev.sparkscope.annotator.core.Text.MAX_DESCRIPTION;
import static dev.sparkscope.annotator.core.Text.MAX_TEXT_PART;
import static dev.sparkscope.annotator.core.Text.clip;
import static dev.sparkscope.annotator.core.Text.firstLine;
import static dev.sparkscope.annotator.core.Text.oneLine;

import java.util.ArrayList;
import java.util.Locale;
import java.util.Map;
import java.util.function.Consumer;
import java.util.function.Supplier;
import java.util.regex.Pattern;


/**
 * Turns the lifecycle of an application, its SQL queries, jobs, stages and
 * executors into line-protocol points, one per entity when it ends, stamped
 * with its start time so Grafana can draw it as a region (time .. end_time_ms).
 * With running points on, a point with status=RUNNING is also written when
 * the entity starts.
 *
 * <p>Series stay few however long the application runs: the only tags are
 * the ones dashboards select by (applicationid, status, straggler, event);
 * ids, groups and names are fields. Points of one measurement and status
 * therefore share a series, so each entity gets a timestamp of its own: its
 * start millisecond plus a sub-millisecond offset derived from its id
 * ({@link #stamp}), and parallel stages that start in the same millisecond
 * never overwrite each other.
 *
 * <p>Takes plain values, not Spark classes, so it is tested without Spark.
 * Called from one thread (Spark's listener bus); not thread-safe.
 */
public final class AnnotationRecorder {

    static final String APPLICATION = Schema.Application.NAME;
    static final String QUERY = Schema.Query.NAME;
    static final String JOB = Schema.Job.NAME;
    static final String STAGE = Schema.Stage.NAME;
    static final String EXECUTOR = Schema.Executor.NAME;
    static final int MAX_OPEN_JOBS = 2000;
    static final int MAX_OPEN_QUERIES = 2000;
    /** Stage id to the open job that submitted it (entries leave with their job). */
    static final int MAX_STAGE_OWNERS = 20_000;

    /** Spark's own words when it cancels a job or stage (DAGScheduler, SparkContext.stop). */
    private static final Pattern CANCELLATION = Pattern.compile(
            "\\b(Job \\d+ cancelled|Job cancelled|Stage cancelled|Query cancelled)\\b"
                    + "|cancelled because SparkContext was shut down",
            Pattern.CASE_INSENSITIVE);

    private static final class OpenQuery {
        final long startMs;
        final String description;

        OpenQuery(long startMs, String description) {
            this.startMs = startMs;
            this.description = description;
        }
    }

    private static final class OpenJob {
        final int jobId;
        final long startMs;
        final String name;
        final String group;
        final Long executionId;
        final int[] stageIds;
        final ConnectOwner connect;
        /** Its tasks' time from launch to finish (their slots held), and how many ended, as they end. */
        long taskMs;
        long taskCount;

        OpenJob(int jobId, long startMs, String name, String group, Long executionId, int[] stageIds,
                ConnectOwner connect) {
            this.connect = connect;
            this.jobId = jobId;
            this.startMs = startMs;
            this.name = name;
            this.group = group;
            this.executionId = executionId;
            this.stageIds = stageIds == null ? new int[0] : stageIds;
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
    private final BoundedMap<Integer, OpenJob> stageOwners = new BoundedMap<>(MAX_STAGE_OWNERS);

    private Long appStartMs;
    private String appName;
    private String job;
    private String sparkUser;
    private String sparkVersion;

    public AnnotationRecorder(Consumer<String> out, Supplier<String> applicationId, boolean runningPoints,
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

    public void applicationStarted(long timeMs, String name, String user, String version) {
        applicationStarted(timeMs, name, null, user, version);
    }

    /**
     * job: the recurring job this run is one of (spark.sparkscope.job); null
     * or blank takes the application's name, so that runs of one name compare.
     * Written as a tag (alerts and boards group by it) on one line, clipped.
     */
    public void applicationStarted(long timeMs, String name, String job, String user, String version) {
        appStartMs = timeMs;
        appName = name;
        String key = isBlank(job) ? name : job;
        this.job = isBlank(key) ? null : oneLine(key);
        sparkUser = user;
        sparkVersion = version;
        if (runningPoints) {
            emit(point(APPLICATION, RUNNING, timeMs, 0)
                    .field(Schema.Application.APP_NAME, name)
                    .tag(Schema.Application.JOB, this.job)
                    .field(Schema.Application.SPARK_USER, user)
                    .field(Schema.Application.SPARK_VERSION, version)
                    .field(Schema.Application.TEXT, "application " + oneLine(name) + " started"));
        }
    }

    /**
     * Spark posts the application's end before its scheduler ends what still
     * runs (SparkContext.stop), and nothing after it reaches InfluxDB: every
     * query, job and stage still open gets its final point now, CANCELLED at
     * the application's end, with the task statistics seen so far.
     */
    public void applicationEnded(long timeMs, Integer exitCode) {
        for (Map.Entry<Long, StageStats> e : new ArrayList<>(stages.entrySet())) {
            StageStats s = e.getValue();
            stageCompleted(s.stageId, s.attempt, s.name, s.numTasks, s.submittedAtMs, timeMs,
                    "Stage cancelled: the application ended while it ran", timeMs);
        }
        for (OpenJob j : new ArrayList<>(jobs.values())) {
            jobEnded(j.jobId, timeMs, false, "Job cancelled: the application ended while it ran");
        }
        for (Long executionId : new ArrayList<>(queries.keySet())) {
            queryEnded(executionId, timeMs, "Query cancelled: the application ended while it ran", true);
        }
        long start = appStartMs != null ? appStartMs : timeMs;
        Long duration = appStartMs != null ? timeMs - appStartMs : null;
        String text = "application " + oneLine(appName == null ? applicationId.get() : appName) + " finished"
                + (duration != null ? " after " + DurationText.of(duration) : "")
                + (exitCode != null && exitCode != 0 ? " with exit code " + exitCode : "");
        emit(point(APPLICATION, FINISHED, start, 0)
                .tag(Schema.Application.JOB, job)
                .field(Schema.Application.APP_NAME, appName)
                .field(Schema.Application.SPARK_USER, sparkUser)
                .field(Schema.Application.SPARK_VERSION, sparkVersion)
                .field(Schema.Application.END_TIME_MS, timeMs)
                .field(Schema.Application.DURATION_MS, duration)
                .field(Schema.Application.EXIT_CODE, exitCode == null ? null : (long) exitCode)
                .field(Schema.Application.TEXT, text));
        stages.clear();
        jobs.clear();
        queries.clear();
        stageOwners.clear();
    }

    // ---- SQL queries ----

    void queryStarted(long executionId, long timeMs, String description) {
        String desc = clip(description, MAX_DESCRIPTION);
        queries.put(executionId, new OpenQuery(timeMs, desc));
        if (runningPoints) {
            emit(point(QUERY, RUNNING, timeMs, executionId)
                    .field(Schema.Query.EXECUTION_ID, executionId)
                    .field(Schema.Query.TEXT, "query " + executionId + " running: " + oneLine(desc)));
        }
    }

    void queryEnded(long executionId, long timeMs, String error) {
        queryEnded(executionId, timeMs, error, isCancellation(error));
    }

    private void queryEnded(long executionId, long timeMs, String error, boolean cancelled) {
        OpenQuery q = queries.remove(executionId);
        boolean failed = error != null && !error.trim().isEmpty();
        String status = !failed ? SUCCEEDED : cancelled ? CANCELLED : FAILED;
        long start = q != null ? q.startMs : timeMs;
        Long duration = q != null ? timeMs - q.startMs : null;
        String desc = q != null ? q.description : null;
        String text = "query " + executionId + (failed ? " " + status : "") + ": " + oneLine(desc)
                + (duration != null ? " (" + DurationText.of(duration) + ")" : "")
                + (failed ? ": " + oneLine(firstLine(error)) : "");
        emit(point(QUERY, status, start, executionId)
                .field(Schema.Query.EXECUTION_ID, executionId)
                .field(Schema.Query.DESCRIPTION, desc)
                .field(Schema.Query.END_TIME_MS, timeMs)
                .field(Schema.Query.DURATION_MS, duration)
                .field(Schema.Query.ERROR, failed ? clip(error, MAX_DESCRIPTION) : null)
                .field(Schema.Query.TEXT, text));
    }

    // ---- jobs ----

    /**
     * @param description    spark.job.description, or null
     * @param callSite       callSite.short (PySpark sets it), or null
     * @param lastStageName  the name of the job's last stage (what Spark's UI
     *                       shows for a job without a description), or null
     * @param stageIds       the job's stages, so their annotations can name the job
     */
    public void jobStarted(int jobId, long timeMs, String description, String callSite, String lastStageName,
                    String group, Long executionId, int[] stageIds) {
        jobStarted(jobId, timeMs, description, callSite, lastStageName, group, executionId, stageIds, null);
    }

    /** @param connect the Spark Connect user, session and operation that ran the job, or null */
    public void jobStarted(int jobId, long timeMs, String description, String callSite, String lastStageName,
                    String group, Long executionId, int[] stageIds, ConnectOwner connect) {
        String name = description;
        if (isBlank(name) && executionId != null) {
            OpenQuery q = queries.get(executionId);
            name = q == null ? null : q.description;
        }
        if (isBlank(name)) {
            name = callSite;
        }
        if (isBlank(name)) {
            name = lastStageName;
        }
        OpenJob job = new OpenJob(jobId, timeMs, clip(name, MAX_DESCRIPTION), group, executionId, stageIds,
                connect);
        jobs.put(jobId, job);
        for (int stageId : job.stageIds) {
            stageOwners.put(stageId, job);
        }
        if (runningPoints) {
            emit(connected(point(JOB, RUNNING, timeMs, jobId), connect)
                    .field(Schema.Job.JOB_ID, (long) jobId)
                    .field(Schema.Job.EXECUTION_ID, executionId)
                    .field(Schema.Job.TEXT, jobText(jobId, " running", group, job.name, null, null)));
        }
    }

    public void jobEnded(int jobId, long timeMs, boolean succeeded, String error) {
        OpenJob j = jobs.remove(jobId);
        if (j != null) {
            // Only open jobs name their stages: a later job that reuses a stage registers it again.
            for (int stageId : j.stageIds) {
                stageOwners.remove(stageId, j);
            }
        }
        long start = j != null ? j.startMs : timeMs;
        Long duration = j != null ? timeMs - j.startMs : null;
        String name = j != null ? j.name : null;
        String group = j != null ? j.group : null;
        String status = succeeded ? SUCCEEDED : isCancellation(error) ? CANCELLED : FAILED;
        emit(connected(point(JOB, status, start, jobId), j != null ? j.connect : null)
                .field(Schema.Job.JOB_ID, (long) jobId)
                .field(Schema.Job.TASK_MS, j != null ? j.taskMs : null)
                .field(Schema.Job.TASK_COUNT, j != null ? j.taskCount : null)
                .field(Schema.Job.JOB_GROUP, group == null ? null : clip(group, MAX_TEXT_PART))
                .field(Schema.Job.DESCRIPTION, name)
                .field(Schema.Job.EXECUTION_ID, j != null ? j.executionId : null)
                .field(Schema.Job.END_TIME_MS, timeMs)
                .field(Schema.Job.DURATION_MS, duration)
                .field(Schema.Job.ERROR, succeeded ? null : clip(error, MAX_DESCRIPTION))
                .field(Schema.Job.TEXT, jobText(jobId, succeeded ? "" : " " + status, group, name, duration,
                        succeeded ? null : error)));
    }

    /** A job's Connect owner: the user a tag, session and operation fields (schema.py says why). */
    private static Point connected(Point p, ConnectOwner connect) {
        if (connect == null) {
            return p;
        }
        return p.tag(Schema.Job.CONNECT_USER, clip(connect.user, MAX_TEXT_PART))
                .field(Schema.Job.CONNECT_SESSION, clip(connect.session, MAX_TEXT_PART))
                .field(Schema.Job.CONNECT_OPERATION, clip(connect.operation, MAX_TEXT_PART));
    }

    private static String jobText(int jobId, String state, String group, String desc, Long duration, String error) {
        return "job " + jobId + state
                + (group != null && !group.isEmpty() ? " [group " + oneLine(group) + "]" : "")
                + ": " + oneLine(desc)
                + (duration != null ? " (" + DurationText.of(duration) + ")" : "")
                + (error != null ? ": " + oneLine(firstLine(error)) : "");
    }

    // ---- stages ----

    public void stageSubmitted(int stageId, int attempt, String name, int numTasks, long submittedMs) {
        long key = stageKey(stageId, attempt);
        if (stages.size() >= maxTrackedStages && !stages.containsKey(key) && !stageCapWarned) {
            stageCapWarned = true;
            warnOnce.accept("sparkscope annotator: more than " + maxTrackedStages
                    + " stages running at once; task statistics of the oldest are dropped (raise "
                    + EventsConfig.MAX_TRACKED_STAGES + " if this is expected)");
        }
        OpenJob job = stageOwners.get(stageId);
        StageStats s = new StageStats(stageId, attempt, submittedMs, name, numTasks,
                job == null ? null : job.jobId, job == null ? null : job.name, job == null ? null : job.executionId);
        stages.put(key, s);
        if (runningPoints) {
            emit(point(STAGE, RUNNING, submittedMs, stageOffset(stageId, attempt))
                    .field(Schema.Stage.STAGE_ID, (long) stageId)
                    .field(Schema.Stage.ATTEMPT, (long) attempt)
                    .field(Schema.Stage.JOB_ID, s.jobId == null ? null : (long) s.jobId)
                    .field(Schema.Stage.NUM_TASKS, (long) numTasks)
                    .field(Schema.Stage.TEXT, "stage " + stageId + "." + attempt + " running: " + oneLine(name)
                            + " (" + numTasks + " tasks)"));
        }
    }

    public void taskEnded(int stageId, int attempt, TaskOutcome outcome, StageStats.Task task) {
        StageStats s = stages.get(stageKey(stageId, attempt));
        // The job that submitted the stage (its statistics name it), else the open job that holds the stage.
        OpenJob job = s != null && s.jobId != null ? jobs.get(s.jobId) : null;
        if (job == null) {
            job = stageOwners.get(stageId);
        }
        if (job != null) {
            job.taskMs += Math.max(0, task.durationMs);
            job.taskCount++;
        }
        if (s == null) {
            return; // stage already completed (late speculative task, resubmission) or evicted
        }
        s.record(outcome, task);
    }

    /**
     * @param submittedMs stage submission time, or null when Spark did not set it
     * @param completedMs stage completion time, or null when Spark did not set it
     */
    public void stageCompleted(int stageId, int attempt, String name, int numTasks, Long submittedMs,
                        Long completedMs, String failureReason, long nowMs) {
        StageStats s = stages.remove(stageKey(stageId, attempt));
        if (s == null) {
            OpenJob job = stageOwners.get(stageId);
            s = new StageStats(stageId, attempt, submittedMs != null ? submittedMs : nowMs, name, numTasks,
                    job == null ? null : job.jobId, job == null ? null : job.name,
                    job == null ? null : job.executionId);
        }
        long start = submittedMs != null ? submittedMs : s.submittedAtMs;
        long end = completedMs != null ? completedMs : nowMs;
        long duration = end - start;
        boolean failed = failureReason != null;
        String status = !failed ? SUCCEEDED : isCancellation(failureReason) ? CANCELLED : FAILED;
        boolean isStraggler = !failed && straggler.isStraggler(s, end);
        StageStats.Task slow = s.slowest();

        StringBuilder text = new StringBuilder();
        text.append("stage ").append(stageId).append('.').append(attempt)
                .append(failed ? " " + status : "").append(": ").append(oneLine(name));
        if (s.jobName != null || s.jobId != null) {
            text.append(" [job ").append(s.jobId == null ? "?" : s.jobId.toString()).append(": ")
                    .append(oneLine(s.jobName)).append(']');
        }
        text.append(" (").append(DurationText.of(duration)).append(", ").append(numTasks).append(" tasks");
        if (slow != null) {
            text.append(", median task ").append(DurationText.of(s.p50Ms()));
        }
        text.append(')');
        if (failed) {
            text.append(": ").append(oneLine(firstLine(failureReason)));
        }
        if (isStraggler) {
            long typical = StragglerRule.typicalMs(s);
            text.append("; STRAGGLER: slowest task ").append(DurationText.of(slow.durationMs))
                    .append(" = ").append(String.format(Locale.ROOT, "%.1f", (double) slow.durationMs
                            / Math.max(1, typical)))
                    .append(s.taskCount() >= StragglerRule.LARGE_STAGE_TASKS ? "x the p95 task" : "x the median")
                    .append(", partition ").append(slow.partition)
                    .append(" on executor ").append(slow.executorId)
                    .append(" (host ").append(slow.host).append(')')
                    .append(readComparison(slow, s))
                    .append(", GC ").append(DurationText.of(slow.gcMs))
                    .append(", fetch wait ").append(DurationText.of(slow.fetchWaitMs));
        }

        Point p = point(STAGE, status, start, stageOffset(stageId, attempt))
                .tag(Schema.Stage.STRAGGLER, Boolean.toString(isStraggler))
                .field(Schema.Stage.STAGE_ID, (long) stageId)
                .field(Schema.Stage.ATTEMPT, (long) attempt)
                .field(Schema.Stage.JOB_ID, s.jobId == null ? null : (long) s.jobId)
                .field(Schema.Stage.JOB_DESCRIPTION, s.jobName)
                .field(Schema.Stage.EXECUTION_ID, s.executionId)
                .field(Schema.Stage.NAME_FIELD, oneLine(name))
                .field(Schema.Stage.NUM_TASKS, (long) numTasks)
                .field(Schema.Stage.FAILURE_REASON, failed ? clip(failureReason, MAX_DESCRIPTION) : null)
                .field(Schema.Stage.END_TIME_MS, end)
                .field(Schema.Stage.DURATION_MS, duration)
                .field(Schema.Stage.TASK_COUNT_SEEN, s.taskCount())
                .field(Schema.Stage.TASK_FAILED_COUNT, s.failedTaskCount())
                .field(Schema.Stage.TASK_KILLED_COUNT, s.killedTaskCount())
                .field(Schema.Stage.TASK_RESUBMITTED_COUNT, s.resubmittedTaskCount());
        if (slow != null) {
            p.field(Schema.Stage.TASK_MAX_MS, s.maxMs())
                    .field(Schema.Stage.TASK_P50_MS, s.p50Ms())
                    .field(Schema.Stage.TASK_P75_MS, s.p75Ms())
                    .field(Schema.Stage.TASK_P95_MS, s.p95Ms())
                    .field(Schema.Stage.SKEW_RATIO, Math.round(s.skewRatio() * 100) / 100.0)
                    .field(Schema.Stage.TASK_MEAN_INPUT_BYTES, Math.round(s.meanInputBytes()))
                    .field(Schema.Stage.TASK_MEAN_SHUFFLE_READ_BYTES, Math.round(s.meanShuffleReadBytes()))
                    .field(Schema.Stage.SLOWEST_PARTITION, (long) slow.partition)
                    .field(Schema.Stage.SLOWEST_EXECUTOR, slow.executorId)
                    .field(Schema.Stage.SLOWEST_HOST, slow.host)
                    .field(Schema.Stage.SLOWEST_INPUT_BYTES, slow.inputBytes)
                    .field(Schema.Stage.SLOWEST_SHUFFLE_READ_BYTES, slow.shuffleReadBytes)
                    .field(Schema.Stage.SLOWEST_GC_MS, slow.gcMs)
                    .field(Schema.Stage.SLOWEST_FETCH_WAIT_MS, slow.fetchWaitMs);
        }
        emit(p.field(Schema.Stage.TEXT, text.toString()));
    }

    /** Whether the slowest task read much more than the average task: data skew rather than a slow host. */
    private static String readComparison(StageStats.Task slow, StageStats s) {
        long read = slow.inputBytes + slow.shuffleReadBytes;
        double mean = s.meanInputBytes() + s.meanShuffleReadBytes();
        if (read <= 0 || mean <= 0) {
            return ", read no input";
        }
        return String.format(Locale.ROOT, ", read %s = %.1fx the average task", bytes(read), read / mean);
    }

    static String bytes(long n) {
        if (n < 1024) {
            return n + " B";
        }
        String[] units = {"KiB", "MiB", "GiB", "TiB"};
        double v = n;
        int u = -1;
        while (v >= 1024 && u < units.length - 1) {
            v /= 1024;
            u++;
        }
        return String.format(Locale.ROOT, "%.1f %s", v, units[u]);
    }

    /** Stages whose task statistics are held right now (tests). */
    int trackedStages() {
        return stages.size();
    }

    /** Stage-to-job entries held right now (tests). */
    int stageOwnersHeld() {
        return stageOwners.size();
    }

    // ---- executors ----

    public void executorAdded(long timeMs, String executorId, String host, int cores) {
        emit(point(EXECUTOR, null, timeMs, executorOffset(executorId))
                .tag(Schema.Executor.EVENT, "added")
                .field(Schema.Executor.EXECUTOR_ID, executorId)
                .field(Schema.Executor.HOST, host)
                .field(Schema.Executor.CORES, (long) cores)
                .field(Schema.Executor.TEXT, "executor " + oneLine(executorId) + " added on " + oneLine(host)
                        + " (" + cores + " cores)"));
    }

    public void executorRemoved(long timeMs, String executorId, String reason) {
        ExecutorLoss loss = ExecutorLoss.of(reason);
        emit(point(EXECUTOR, null, timeMs, executorOffset(executorId))
                .tag(Schema.Executor.EVENT, "removed")
                .field(Schema.Executor.EXECUTOR_ID, executorId)
                .field(Schema.Executor.REASON, clip(reason, MAX_DESCRIPTION))
                .field(Schema.Executor.CAUSE, loss.cause)
                .field(Schema.Executor.EXIT_CODE, loss.exitCode == null ? null : Long.valueOf(loss.exitCode))
                .field(Schema.Executor.TEXT, "executor " + oneLine(executorId) + " removed"
                        + (reason != null && !reason.isEmpty() ? ": " + oneLine(reason) : "")));
    }

    // ---- helpers ----

    private Point point(String measurement, String status, long timeMs, long entityOffset) {
        return Point.measurement(measurement)
                .tag(Schema.APPLICATION, applicationId.get())
                .tag(Schema.STATUS, status)
                .timeNs(stamp(timeMs, entityOffset));
    }

    /** Attempts of one stage get neighbouring offsets (up to 16 attempts apart). */
    static long stageOffset(int stageId, int attempt) {
        return (long) stageId * 16 + Math.min(Math.max(attempt, 0), 15);
    }

    static long executorOffset(String executorId) {
        if (executorId == null) {
            return 0;
        }
        try {
            return Long.parseLong(executorId);
        } catch (NumberFormatException e) {
            return executorId.hashCode();
        }
    }

    /** Whether Spark's failure text says the work was cancelled rather than failed. */
    static boolean isCancellation(String error) {
        return error != null && CANCELLATION.matcher(error).find();
    }

    private void emit(Point p) {
        out.accept(p.toLine());
    }

    private static long stageKey(int stageId, int attempt) {
        return ((long) stageId << 32) | (attempt & 0xffffffffL);
    }

    private static boolean isBlank(String s) {
        return s == null || s.trim().isEmpty();
    }
}
