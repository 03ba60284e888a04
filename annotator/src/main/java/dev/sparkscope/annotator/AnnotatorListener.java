package dev.sparkscope.annotator;

import dev.sparkscope.annotator.container.ContainerSampler;
import dev.sparkscope.annotator.core.AnnotatorLog;
import dev.sparkscope.annotator.core.ApplicationIdTag;
import dev.sparkscope.annotator.core.ConfigKeys;
import dev.sparkscope.annotator.core.InfluxWriter;
import dev.sparkscope.annotator.core.JobProperties;
import dev.sparkscope.annotator.core.RateLimitedWarning;
import dev.sparkscope.annotator.core.ScalaOption;
import dev.sparkscope.annotator.core.ScalaSeq;
import dev.sparkscope.annotator.core.SharedWriter;
import dev.sparkscope.annotator.core.SinkConfig;
import dev.sparkscope.annotator.events.AnnotationRecorder;
import dev.sparkscope.annotator.events.ConnectEvents;
import dev.sparkscope.annotator.events.ConnectOwner;
import dev.sparkscope.annotator.events.EventsConfig;
import dev.sparkscope.annotator.events.SqlExecutionEvents;
import dev.sparkscope.annotator.events.StageStats;
import dev.sparkscope.annotator.events.TaskOutcome;
import dev.sparkscope.annotator.memory.ExecutorPeakEvents;
import dev.sparkscope.annotator.memory.ExecutorPeaks;
import dev.sparkscope.annotator.memory.TaskTimeTotals;
import dev.sparkscope.annotator.profiler.ProfilerSettings;
import dev.sparkscope.annotator.streaming.StreamingEvents;
import dev.sparkscope.annotator.streaming.StreamingQueries;

import java.lang.reflect.Method;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.Collections;
import java.util.HashSet;
import java.util.List;
import java.util.Properties;
import java.util.Set;
import java.util.function.Consumer;
import java.util.function.Function;
import java.util.function.Supplier;

import org.apache.spark.SparkConf;
import org.apache.spark.SparkFirehoseListener;
import org.apache.spark.TaskEndReason;
import org.apache.spark.executor.InputMetrics;
import org.apache.spark.executor.ShuffleReadMetrics;
import org.apache.spark.executor.ShuffleWriteMetrics;
import org.apache.spark.executor.TaskMetrics;
import org.apache.spark.scheduler.JobFailed;
import org.apache.spark.scheduler.JobResult;
import org.apache.spark.scheduler.SparkListenerApplicationEnd;
import org.apache.spark.scheduler.SparkListenerApplicationStart;
import org.apache.spark.scheduler.SparkListenerEvent;
import org.apache.spark.scheduler.SparkListenerExecutorAdded;
import org.apache.spark.scheduler.SparkListenerExecutorRemoved;
import org.apache.spark.scheduler.SparkListenerJobEnd;
import org.apache.spark.scheduler.SparkListenerJobStart;
import org.apache.spark.scheduler.SparkListenerStageCompleted;
import org.apache.spark.scheduler.SparkListenerStageSubmitted;
import org.apache.spark.scheduler.SparkListenerTaskEnd;
import org.apache.spark.scheduler.StageInfo;
import org.apache.spark.scheduler.TaskInfo;
import org.apache.spark.scheduler.cluster.ExecutorInfo;

import scala.Tuple2;

/**
 * Writes SQL queries, jobs, stages (with straggler detection), executors and
 * the application itself to InfluxDB as annotation points. Attach with
 * {@code spark.plugins=dev.sparkscope.annotator.ListenerPlugin} (Spark's status queue; see that class), or {@code spark.extraListeners=dev.sparkscope.annotator.AnnotatorListener} (a queue of its own).
 *
 * <p>Built on SparkFirehoseListener (one {@code onEvent} for every event) so
 * that new callbacks in later Spark versions need nothing from this class.
 * Only accessors whose signatures are the same in Scala 2.12 and 2.13 are
 * used, so one jar serves Spark 3.5 and 4.x. Nothing thrown here reaches
 * Spark's listener bus: each event is handled inside catch Throwable, and an
 * event type that hits a LinkageError (an API that differs in this Spark
 * version) is ignored from then on.
 */
public class AnnotatorListener extends SparkFirehoseListener {

    private static final String JOB_DESCRIPTION = "spark.job.description";
    private static final String JOB_GROUP = "spark.jobGroup.id";
    private static final String CALL_SITE_SHORT = "callSite.short";
    /** Spark 3.5+: the job's tags, comma-separated (Spark Connect tags each operation's jobs). */
    private static final String JOB_TAGS = "spark.job.tags";

    /** Everything the listener needs once started; null when the listener is off. */
    private static final class Running {
        final ListenerConfig config;
        final SharedWriter.Handle writer;
        final AnnotationRecorder recorder;
        final SqlExecutionEvents sql;
        final StreamingEvents streaming;
        final ExecutorPeakEvents peaks;
        final TaskTimeTotals taskTime;
        final ConnectOwner.Operations connectOperations = new ConnectOwner.Operations();
        final ConnectEvents connect = new ConnectEvents(connectOperations, AnnotatorLog::warn);

        Running(ListenerConfig config, SharedWriter.Handle writer, AnnotationRecorder recorder, SqlExecutionEvents sql,
                StreamingEvents streaming, ExecutorPeakEvents peaks, TaskTimeTotals taskTime) {
            this.config = config;
            this.writer = writer;
            this.recorder = recorder;
            this.sql = sql;
            this.streaming = streaming;
            this.peaks = peaks;
            this.taskTime = taskTime;
        }
    }

    /**
     * Every spark.sparkscope.* key any part of this jar reads: a set key that
     * none declares is warned about as a typo. The listener checks for all of
     * them, since it is the part nearly every run attaches.
     */
    static final ConfigKeys KNOWN_KEYS = new ConfigKeys(Arrays.asList(ListenerConfig.KEYS, SinkConfig.KEYS,
            EventsConfig.KEYS, ContainerSampler.KEYS, ProfilerSettings.KEYS), SinkConfig.RETIRED);

    private final Running running;
    private final Function<String, String> conf;
    private final Consumer<String> startWarn;
    private final RateLimitedWarning eventFailure =
            new RateLimitedWarning(AnnotatorLog::warn, 60_000, System::currentTimeMillis);
    private final Set<Class<?>> brokenEventTypes = Collections.synchronizedSet(new HashSet<>());
    private volatile boolean stopped;
    private final Part peaks = new Part("memory peaks", this::addPeaks);
    private final Part taskTime = new Part("task time totals", this::addTaskTime);
    private String applicationId;
    private String applicationIdFromEvent;

    /** Called by Spark for every class named in spark.extraListeners. Never throws. */
    public AnnotatorListener(SparkConf sparkConf) {
        this(key -> {
            try {
                return sparkConf == null ? null : sparkConf.get(key, null);
            } catch (Throwable t) {
                return null;
            }
        }, () -> keysOf(sparkConf));
    }

    /** For tests: settings from any key-to-value lookup (null when unset) and the keys that are set. */
    AnnotatorListener(Function<String, String> conf, Supplier<Collection<String>> keys) {
        this(conf, keys, AnnotatorLog::warn);
    }

    /** warn: where the start's warnings go (the log; tests read them). */
    AnnotatorListener(Function<String, String> conf, Supplier<Collection<String>> keys, Consumer<String> warn) {
        this.conf = conf;
        this.startWarn = warn;
        this.running = start(conf, keys);
    }

    static Collection<String> keysOf(SparkConf sparkConf) {
        List<String> keys = new ArrayList<>();
        if (sparkConf != null) {
            for (Tuple2<String, String> kv : sparkConf.getAll()) {
                keys.add(kv._1());
            }
        }
        return keys;
    }

    private Running start(Function<String, String> lookup, Supplier<Collection<String>> keys) {
        ListenerConfig config;
        try {
            for (String warning : KNOWN_KEYS.unknownKeys(keys.get())) {
                startWarn.accept(warning);
            }
        } catch (Throwable t) {
            rethrowIfFatal(t);
        }
        try {
            config = ListenerConfig.parse(lookup);
        } catch (IllegalArgumentException e) {
            startWarn.accept("sparkscope annotator is off for this application: " + e.getMessage()
                    + ". Fix the setting(s) above (see the annotator README); Spark runs normally meanwhile.");
            return null;
        } catch (Throwable t) {
            rethrowIfFatal(t);
            startWarn.accept("sparkscope annotator is off for this application: could not read its settings: " + t);
            return null;
        }
        if (!config.enabled) {
            AnnotatorLog.info("sparkscope annotator is off (" + ListenerConfig.ENABLED + "=false)");
            return null;
        }
        try {
            applicationId = ApplicationIdTag.resolve(lookup);
            // Shared with the container sampler in this JVM (one queue, one thread); the log
            // still names the listener for its own lines.
            SharedWriter.Handle writer = SharedWriter.open(config.sink, "sparkscope annotator", "annotation line");
            AnnotationRecorder recorder = new AnnotationRecorder(writer::enqueue, this::applicationId,
                    config.events.runningPoints, config.events.straggler, config.events.maxTrackedStages,
                    AnnotatorLog::warn);
            SqlExecutionEvents sql = new SqlExecutionEvents(AnnotatorLog::warn);
            AnnotatorLog.info("sparkscope annotator: writing annotations of application "
                    + (applicationId == null ? "(id not known yet)" : applicationId) + " to "
                    + InfluxWriter.redact(config.sink.influxUrl) + ", database " + config.sink.database);
            ExecutorPeakEvents peaks = new ExecutorPeakEvents(
                    new ExecutorPeaks(writer::enqueue, this::applicationId), lookup);
            StreamingEvents streaming = new StreamingEvents(
                    new StreamingQueries(writer::enqueue, this::applicationId, config.events.runningPoints),
                    AnnotatorLog::warn);
            return new Running(config, writer, recorder, sql, streaming, peaks,
                    new TaskTimeTotals(writer::enqueue, this::applicationId));
        } catch (Throwable t) {
            rethrowIfFatal(t);
            startWarn.accept("sparkscope annotator is off for this application: could not start: " + t);
            return null;
        }
    }

    /** Whether the listener writes anything (false when disabled or misconfigured). */
    public boolean isActive() {
        return running != null && !stopped;
    }

    @Override
    public void onEvent(SparkListenerEvent event) {
        if (running == null || stopped || event == null) {
            return;
        }
        Class<?> type = event.getClass();
        if (!brokenEventTypes.isEmpty() && brokenEventTypes.contains(type)) {
            return;
        }
        peaks.handle(event, type);
        taskTime.handle(event, type);
        try {
            dispatch(event);
        } catch (LinkageError e) {
            brokenEventTypes.add(type);
            AnnotatorLog.warn("sparkscope annotator: ignoring " + type.getSimpleName()
                    + " events from now on: this Spark version differs from what the annotator was built for (" + e + ")");
        } catch (Throwable t) {
            rethrowIfFatal(t);
            eventFailure.warn(() -> "sparkscope annotator: could not handle " + type.getSimpleName()
                    + " (" + t + "); Spark is not affected");
        }
    }

    /** Out of memory and the like are not ours to swallow: the JVM must learn of them. */
    static void rethrowIfFatal(Throwable t) {
        if (t instanceof VirtualMachineError) {
            throw (VirtualMachineError) t;
        }
    }

    /**
     * One part of what the listener records beside the annotations, fed every
     * event before dispatch (the application's end writes its last points
     * before the writer stops). A failure loses that event for this part
     * only; an API this Spark version lacks turns the part off for good.
     */
    private final class Part {
        private final String name;
        private final java.util.function.Consumer<SparkListenerEvent> action;
        private volatile boolean broken;

        Part(String name, java.util.function.Consumer<SparkListenerEvent> action) {
            this.name = name;
            this.action = action;
        }

        void handle(SparkListenerEvent event, Class<?> type) {
            if (broken) {
                return;
            }
            try {
                action.accept(event);
            } catch (LinkageError e) {
                broken = true;
                AnnotatorLog.warn("sparkscope annotator: " + name + " are off from now on: this Spark version's "
                        + type.getSimpleName() + " differs from what the annotator was built for (" + e + ")");
            } catch (Throwable t) {
                rethrowIfFatal(t);
                eventFailure.warn(() -> "sparkscope annotator: could not read " + name + " from "
                        + type.getSimpleName() + " (" + t + "); Spark is not affected");
            }
        }
    }

    private void addPeaks(SparkListenerEvent event) {
        running.peaks.handle(event);
    }

    private void addTaskTime(SparkListenerEvent event) {
        TaskTimeTotals totals = running.taskTime;
        if (event instanceof SparkListenerTaskEnd) {
            SparkListenerTaskEnd e = (SparkListenerTaskEnd) event;
            TaskEndReason reason = e.reason();
            TaskMetrics m = e.taskMetrics();
            if (m != null && reason != null
                    && TaskOutcome.fromReasonClass(reason.getClass().getName()) == TaskOutcome.SUCCEEDED) {
                ShuffleReadMetrics read = m.shuffleReadMetrics();
                ShuffleWriteMetrics write = m.shuffleWriteMetrics();
                totals.taskSucceeded(m.executorRunTime(), m.executorCpuTime(), m.jvmGCTime(),
                        m.executorDeserializeTime(), read == null ? 0 : read.fetchWaitTime(),
                        write == null ? 0 : write.writeTime());
            }
        }
        if (event instanceof SparkListenerApplicationEnd) {
            totals.applicationEnded(((SparkListenerApplicationEnd) event).time());
        } else {
            totals.tick(System.currentTimeMillis());
        }
    }

    private void dispatch(SparkListenerEvent event) {
        AnnotationRecorder r = running.recorder;
        if (event instanceof SparkListenerTaskEnd) {
            onTaskEnd((SparkListenerTaskEnd) event, r);
        } else if (event instanceof SparkListenerStageSubmitted) {
            StageInfo s = ((SparkListenerStageSubmitted) event).stageInfo();
            Long submitted = ScalaOption.number(s.submissionTime());
            r.stageSubmitted(s.stageId(), s.attemptNumber(), s.name(), s.numTasks(),
                    submitted != null ? submitted : System.currentTimeMillis());
        } else if (event instanceof SparkListenerStageCompleted) {
            StageInfo s = ((SparkListenerStageCompleted) event).stageInfo();
            r.stageCompleted(s.stageId(), s.attemptNumber(), s.name(), s.numTasks(),
                    ScalaOption.number(s.submissionTime()), ScalaOption.number(s.completionTime()),
                    ScalaOption.string(s.failureReason()), System.currentTimeMillis());
        } else if (event instanceof SparkListenerJobStart) {
            SparkListenerJobStart e = (SparkListenerJobStart) event;
            Properties p = e.properties();
            List<Object> stageInfos = ScalaSeq.elements(e, "stageInfos");
            int[] stageIds = new int[stageInfos.size()];
            StageInfo last = null;
            for (int i = 0; i < stageIds.length; i++) {
                StageInfo s = (StageInfo) stageInfos.get(i);
                stageIds[i] = s.stageId();
                if (last == null || s.stageId() > last.stageId()) {
                    last = s;
                }
            }
            r.jobStarted(e.jobId(), e.time(), JobProperties.property(p, JOB_DESCRIPTION),
                    JobProperties.property(p, CALL_SITE_SHORT), last == null ? null : last.name(),
                    JobProperties.property(p, JOB_GROUP),
                    JobProperties.parseLong(JobProperties.property(p, JobProperties.SQL_EXECUTION_ID)), stageIds,
                    running.connectOperations.ofJob(JobProperties.property(p, JOB_TAGS)));
        } else if (event instanceof SparkListenerJobEnd) {
            SparkListenerJobEnd e = (SparkListenerJobEnd) event;
            JobResult result = e.jobResult();
            boolean failed = result instanceof JobFailed;
            String error = null;
            if (failed) {
                Exception cause = ((JobFailed) result).exception();
                error = cause == null ? "failed" : String.valueOf(cause.getMessage());
            }
            r.jobEnded(e.jobId(), e.time(), !failed, error);
        } else if (event instanceof SparkListenerExecutorAdded) {
            SparkListenerExecutorAdded e = (SparkListenerExecutorAdded) event;
            ExecutorInfo info = e.executorInfo();
            r.executorAdded(e.time(), e.executorId(), info == null ? null : info.executorHost(),
                    info == null ? 0 : info.totalCores());
        } else if (event instanceof SparkListenerExecutorRemoved) {
            SparkListenerExecutorRemoved e = (SparkListenerExecutorRemoved) event;
            r.executorRemoved(e.time(), e.executorId(), e.reason());
        } else if (event instanceof SparkListenerApplicationStart) {
            SparkListenerApplicationStart e = (SparkListenerApplicationStart) event;
            applicationIdFromEvent = ScalaOption.string(e.appId());
            r.applicationStarted(e.time(), e.appName(), running.config.events.job, e.sparkUser(), sparkVersion());
        } else if (event instanceof SparkListenerApplicationEnd) {
            onApplicationEnd((SparkListenerApplicationEnd) event, r);
        } else if (!running.sql.handle(event, r) && !running.connect.handle(event)) {
            running.streaming.handle(event);
        }
    }

    private static void onTaskEnd(SparkListenerTaskEnd e, AnnotationRecorder r) {
        TaskInfo info = e.taskInfo();
        if (info == null) {
            return;
        }
        TaskEndReason reason = e.reason();
        TaskOutcome outcome = TaskOutcome.fromReasonClass(reason == null ? null : reason.getClass().getName());
        StageStats.Task t = new StageStats.Task();
        t.finishMs = info.finishTime() > 0 ? info.finishTime() : System.currentTimeMillis();
        t.durationMs = info.finishTime() > 0 ? info.finishTime() - info.launchTime() : 0;
        t.partition = info.partitionId();
        t.executorId = info.executorId();
        t.host = info.host();
        TaskMetrics m = e.taskMetrics();
        if (m != null) {
            t.gcMs = m.jvmGCTime();
            InputMetrics input = m.inputMetrics();
            t.inputBytes = input == null ? 0 : input.bytesRead();
            ShuffleReadMetrics shuffle = m.shuffleReadMetrics();
            if (shuffle != null) {
                t.fetchWaitMs = shuffle.fetchWaitTime();
                t.shuffleReadBytes = shuffle.totalBytesRead();
            }
        }
        r.taskEnded(e.stageId(), e.stageAttemptId(), outcome, t);
    }

    private void onApplicationEnd(SparkListenerApplicationEnd e, AnnotationRecorder r) {
        try {
            r.applicationEnded(e.time(), exitCode(e));
        } finally {
            close();
        }
    }

    /**
     * Stops writing and lets go of this JVM's shared writer, once: at the
     * application's end, or when Spark shuts the plugins down without one
     * (a SparkContext that failed to start never posts it). Returns whether
     * this call closed it.
     */
    synchronized boolean close() {
        if (running == null || stopped) {
            return false;
        }
        stopped = true;
        running.writer.close(running.config.sink.shutdownTimeoutMs);
        return true;
    }

    /** The tag value: as Spark's metrics system names this application (see ApplicationIdTag). */
    private String applicationId() {
        if (applicationId == null) {
            applicationId = ApplicationIdTag.resolve(conf);
        }
        if (applicationId != null) {
            return applicationId;
        }
        return applicationIdFromEvent != null ? applicationIdFromEvent : "unknown";
    }

    /** SparkListenerApplicationEnd.exitCode exists from Spark 4 on only. */
    private static Integer exitCode(SparkListenerApplicationEnd e) {
        try {
            Method m = e.getClass().getMethod("exitCode");
            Long code = ScalaOption.number(m.invoke(e));
            return code == null ? null : code.intValue();
        } catch (ReflectiveOperationException | RuntimeException | LinkageError ignored) {
            return null;
        }
    }

    /** org.apache.spark.package$.MODULE$.SPARK_VERSION(), or null if not readable. */
    static String sparkVersion() {
        try {
            Class<?> pkg = Class.forName("org.apache.spark.package$");
            Object module = pkg.getField("MODULE$").get(null);
            return (String) pkg.getMethod("SPARK_VERSION").invoke(module);
        } catch (ReflectiveOperationException | RuntimeException | LinkageError ignored) {
            return null;
        }
    }

}
