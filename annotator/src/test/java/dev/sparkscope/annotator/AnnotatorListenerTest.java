package dev.sparkscope.annotator;

import dev.sparkscope.annotator.core.FakeInflux;
import dev.sparkscope.annotator.core.InfluxLineReader;
import dev.sparkscope.annotator.events.TaskOutcome;
import dev.sparkscope.annotator.memory.ExecutorPeaks;
import dev.sparkscope.annotator.memory.TaskTimeTotals;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;

import org.apache.spark.Success$;
import org.apache.spark.scheduler.JobSucceeded$;
import org.apache.spark.scheduler.SparkListenerApplicationEnd;
import org.apache.spark.scheduler.SparkListenerApplicationStart;
import org.apache.spark.scheduler.SparkListenerExecutorAdded;
import org.apache.spark.scheduler.SparkListenerJobEnd;
import org.apache.spark.scheduler.SparkListenerJobStart;
import org.apache.spark.scheduler.SparkListenerStageCompleted;
import org.apache.spark.scheduler.SparkListenerStageSubmitted;
import org.apache.spark.scheduler.SparkListenerTaskEnd;
import org.apache.spark.scheduler.StageInfo;
import org.apache.spark.scheduler.TaskInfo;
import org.apache.spark.scheduler.TaskLocality;
import org.apache.spark.sql.execution.ui.SparkListenerSQLExecutionEnd;
import org.apache.spark.sql.execution.ui.SparkListenerSQLExecutionStart;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import scala.Option;
import scala.collection.immutable.Nil$;

/** The listener fed with real Spark 3.5 event objects, writing to an in-process InfluxDB stand-in. */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class AnnotatorListenerTest {

    private final Map<String, String> conf = new HashMap<>();

    @Test
    void a_run_of_events_arrives_as_annotations_with_the_app_id_on_every_point() throws Exception {
        try (FakeInflux influx = FakeInflux.answering(204)) {
            AnnotatorListener listener = listenerWritingTo(influx, "spark.app.id", "local-42",
                    "spark.sparkscope.flushIntervalMs", "20", "spark.sparkscope.runningPoints", "false");
            assertTrue(listener.isActive());

            // Before ApplicationStart, as in Spark; a real ExecutorInfo needs log4j-core, absent here.
            listener.onEvent(new SparkListenerExecutorAdded(900, "driver", null));
            listener.onEvent(new SparkListenerApplicationStart("etl", Option.apply("local-42"), 1000, "alice",
                    Option.empty(), Option.empty(), Option.empty()));
            listener.onEvent(new SparkListenerSQLExecutionStart(0, 1100, "SELECT 1"));
            Properties props = new Properties();
            props.setProperty("spark.job.description", "nightly \"load\"");
            props.setProperty("spark.jobGroup.id", "etl group");
            props.setProperty("spark.sql.execution.id", "0");
            listener.onEvent(new SparkListenerJobStart(3, 1200, seq(), props));
            StageInfo stage = stage(5, 8);
            stage.submissionTime_$eq(Option.apply((Object) 1300L));
            listener.onEvent(new SparkListenerStageSubmitted(stage, props));
            for (int t = 0; t < 8; t++) {
                listener.onEvent(taskEnd(5, t, t == 3 ? 9_000 : 500 + t, t == 3 ? "7" : "1"));
            }
            stage.completionTime_$eq(Option.apply((Object) 10_400L));
            listener.onEvent(new SparkListenerStageCompleted(stage));
            listener.onEvent(new SparkListenerJobEnd(3, 10_500, JobSucceeded$.MODULE$));
            listener.onEvent(new SparkListenerSQLExecutionEnd(0, 10_600, null));
            listener.onEvent(new SparkListenerApplicationEnd(11_000));
            assertFalse(listener.isActive(), "stopped after application end");

            List<String> lines = influx.lines();
            lines.removeIf(l -> l.startsWith(ExecutorPeaks.MEMORY_CONF + ",")); // ExecutorPeaksTest's
            lines.removeIf(l -> l.startsWith(TaskTimeTotals.PREFIX)); // the next test's
            List<String> kinds = new ArrayList<>();
            for (String line : lines) {
                InfluxLineReader p = InfluxLineReader.read(line);
                assertEquals("local-42", p.tags.get("applicationid"), line);
                kinds.add(p.measurement + "/" + p.tags.get("status"));
            }
            assertEquals(java.util.Arrays.asList("sparkscope_executor/null", "sparkscope_stage/SUCCEEDED", "sparkscope_job/SUCCEEDED",
                    "sparkscope_query/SUCCEEDED", "sparkscope_application/FINISHED"), kinds);
            InfluxLineReader stagePoint = InfluxLineReader.read(lines.get(1));
            assertEquals("true", stagePoint.tags.get("straggler"));
            assertEquals(1300L * 1_000_000 + 5 * 16, stagePoint.time);
            assertEquals("9100i", stagePoint.fields.get("duration_ms"));
            assertEquals("7", stagePoint.fields.get("slowest_executor"));
            assertEquals("3i", stagePoint.fields.get("slowest_partition"));
            InfluxLineReader job = InfluxLineReader.read(lines.get(2));
            assertEquals("etl group", job.fields.get("job_group"));
            assertEquals("nightly \"load\"", job.fields.get("description"));
            assertEquals("0i", job.fields.get("execution_id"));
            InfluxLineReader query = InfluxLineReader.read(lines.get(3));
            assertEquals("SELECT 1", query.fields.get("description"));
            assertEquals("9500i", query.fields.get("duration_ms"));
        }
    }

    @Test
    void task_time_totals_add_up_successful_tasks_only_and_end_with_the_application() throws Exception {
        try (FakeInflux influx = FakeInflux.answering(204)) {
            AnnotatorListener listener = listenerWritingTo(influx, "spark.app.id", "local-7",
                    "spark.sparkscope.flushIntervalMs", "20");
            listener.onEvent(new SparkListenerApplicationStart("etl", Option.apply("local-7"), 1000, "alice",
                    Option.empty(), Option.empty(), Option.empty()));
            listener.onEvent(taskEnd(1, 0, 700, "1", Success$.MODULE$, metrics(600, 500_000_000L, 40, 9, 25, 3_000)));
            listener.onEvent(taskEnd(1, 1, 900, "2", Success$.MODULE$, metrics(800, 700_000_000L, 60, 11, 5, 7_000)));
            // A failed and a killed task: the executors' counters leave them out, so do the totals.
            listener.onEvent(taskEnd(1, 2, 900, "2", new org.apache.spark.ExceptionFailure("x", "boom",
                    new StackTraceElement[0], "", Option.empty(), seq(), seq(), seq()),
                    metrics(100_000, 1, 1, 1, 1, 1)));
            listener.onEvent(taskEnd(1, 3, 900, "2", new org.apache.spark.TaskKilled("speculation", seq(), seq(),
                    seq()), metrics(100_000, 1, 1, 1, 1, 1)));
            listener.onEvent(taskEnd(1, 4, 900, "2", Success$.MODULE$, null)); // no metrics: nothing to add
            listener.onEvent(new SparkListenerApplicationEnd(11_000));

            Map<String, List<InfluxLineReader>> byCounter = new HashMap<>();
            for (String line : influx.lines()) {
                InfluxLineReader p = InfluxLineReader.read(line);
                if (p.measurement.startsWith(TaskTimeTotals.PREFIX)) {
                    assertEquals("local-7", p.tags.get("applicationid"), line);
                    assertEquals(1, p.tags.size(), "no executor tag: one series per application: " + line);
                    byCounter.computeIfAbsent(p.measurement.substring(TaskTimeTotals.PREFIX.length()),
                            k -> new ArrayList<>()).add(p);
                }
            }
            assertEquals(new java.util.HashSet<>(TaskTimeTotals.COUNTERS), byCounter.keySet());
            Map<String, String> last = new HashMap<>();
            for (Map.Entry<String, List<InfluxLineReader>> e : byCounter.entrySet()) {
                List<InfluxLineReader> points = e.getValue();
                assertTrue(points.size() >= 2, "a first point and the application end's: " + points);
                assertEquals("0", points.get(0).fields.get("value"), "the first point, at the first event, is 0");
                for (int i = 1; i < points.size(); i++) {
                    assertTrue(points.get(i).time > points.get(i - 1).time, "each point after the previous one");
                }
                last.put(e.getKey(), points.get(points.size() - 1).fields.get("value"));
            }
            assertEquals("1400", last.get("runTime.count"));
            assertEquals("1200000000", last.get("cpuTime.count"));
            assertEquals("100", last.get("jvmGCTime.count"));
            assertEquals("20", last.get("deserializeTime.count"));
            assertEquals("30", last.get("shuffleFetchWaitTime.count"));
            assertEquals("10000", last.get("shuffleWriteTime.count"));
        }
    }

    @Test
    void an_api_mismatch_in_one_event_type_never_reaches_spark_and_that_type_is_skipped_after() throws Exception {
        try (FakeInflux influx = FakeInflux.answering(204)) {
            AnnotatorListener listener = listenerWritingTo(influx);
            int[] calls = {0};
            Supplier<Error> mismatch = () -> {
                calls[0]++;
                return new NoSuchMethodError("properties() as in another Spark version");
            };
            listener.onEvent(new JobStartFailing(mismatch));
            listener.onEvent(new JobStartFailing(mismatch));
            assertEquals(1, calls[0], "the second event of the broken type is not even looked at");
            listener.onEvent(new SparkListenerSQLExecutionStart(1, 1, null)); // accessor throws: this event is lost
            listener.onEvent(new SparkListenerSQLExecutionStart(2, 1, "ok"));  // the next one is annotated
            listener.onEvent(new SparkListenerJobStart(2, 5, seq(), null));     // other types still work
            assertTrue(listener.isActive());
            listener.onEvent(new SparkListenerApplicationEnd(10));
            List<String> lines = influx.lines();
            assertTrue(lines.stream().anyMatch(l -> l.startsWith("sparkscope_job,") && l.contains("job_id=2i")), lines.toString());
            assertTrue(lines.stream().noneMatch(l -> l.startsWith("sparkscope_query,") && l.contains("execution_id=1i")),
                    lines.toString());
            assertTrue(lines.stream().anyMatch(l -> l.startsWith("sparkscope_query,") && l.contains("execution_id=2i")),
                    "a runtime failure in one SQL event leaves SQL annotations on: " + lines);
        }
    }

    @Test
    void task_end_reasons_of_spark_itself_are_told_apart() {
        assertEquals(TaskOutcome.SUCCEEDED, TaskOutcome.fromReasonClass(Success$.MODULE$.getClass().getName()));
        assertEquals(TaskOutcome.RESUBMITTED,
                TaskOutcome.fromReasonClass(org.apache.spark.Resubmitted$.MODULE$.getClass().getName()));
        assertEquals(TaskOutcome.KILLED, TaskOutcome.fromReasonClass(org.apache.spark.TaskKilled.class.getName()));
        assertEquals(TaskOutcome.KILLED,
                TaskOutcome.fromReasonClass(org.apache.spark.TaskCommitDenied.class.getName()));
        assertEquals(TaskOutcome.FAILED,
                TaskOutcome.fromReasonClass(org.apache.spark.ExecutorLostFailure.class.getName()));
        assertEquals(TaskOutcome.FAILED, TaskOutcome.fromReasonClass(org.apache.spark.TaskResultLost$.class.getName()));
    }

    @Test
    void a_fatal_jvm_error_is_not_swallowed() {
        try (FakeInflux influx = FakeInflux.answering(204)) {
            AnnotatorListener listener = listenerWritingTo(influx);
            org.junit.jupiter.api.Assertions.assertThrows(OutOfMemoryError.class,
                    () -> listener.onEvent(new JobStartFailing(() -> new OutOfMemoryError("test"))));
            listener.onEvent(new SparkListenerApplicationEnd(10));
        } catch (Exception e) {
            throw new AssertionError(e);
        }
    }

    @Test
    void misspelt_settings_are_warned_about_with_the_key_meant() {
        conf.put("spark.sparkscope.influx.ulr", "http://x:1");
        conf.put("spark.sparkscope.queueCapacity", "10");
        conf.put("spark.sparkscope.runningPoints", "true");
        List<String> w = AnnotatorListener.KNOWN_KEYS.unknownKeys(conf.keySet());
        assertEquals(2, w.size(), w.toString());
        assertTrue(w.stream().anyMatch(s -> s.contains("spark.sparkscope.influx.ulr")
                && s.contains("did you mean spark.sparkscope.influx.url?")), w.toString());
        assertTrue(w.stream().anyMatch(s -> s.contains("queueMaxBytes")), w.toString());
    }

    @Test
    void misconfigured_listener_does_not_throw_and_does_nothing() {
        conf.put("spark.sparkscope.batchSize", "many");
        AnnotatorListener listener = new AnnotatorListener(conf::get, conf::keySet);
        assertFalse(listener.isActive());
        listener.onEvent(new SparkListenerApplicationEnd(10));
        listener.onEvent(null);
    }

    @Test
    void a_bad_straggler_ratio_turns_the_listener_off_with_one_warning_naming_the_key() {
        conf.put("spark.sparkscope.straggler.ratio", "0.5");
        List<String> warnings = new ArrayList<>();
        AnnotatorListener listener = new AnnotatorListener(conf::get, conf::keySet, warnings::add);
        assertFalse(listener.isActive());
        assertEquals(1, warnings.size(), warnings.toString());
        assertTrue(warnings.get(0).contains("spark.sparkscope.straggler.ratio=0.5"), warnings.get(0));
        // The plugins' own settings are keys the listener knows: no typo warning for them.
        assertTrue(AnnotatorListener.KNOWN_KEYS.unknownKeys(java.util.Arrays.asList(
                "spark.sparkscope.container.periodSeconds", "spark.sparkscope.profiler.continuous")).isEmpty());
    }

    @Test
    void disabled_listener_does_nothing() {
        conf.put("spark.sparkscope.enabled", "false");
        assertFalse(new AnnotatorListener(conf::get, conf::keySet).isActive());
    }

    @Test
    void spark_version_is_read_from_spark_itself() {
        assertEquals("3.5.9", AnnotatorListener.sparkVersion());
    }

    /** A listener writing to influx, with these settings (key, value, key, value, ...) besides its URL. */
    private AnnotatorListener listenerWritingTo(FakeInflux influx, String... keysAndValues) {
        conf.put("spark.sparkscope.influx.url", influx.baseUrl());
        for (int i = 0; i < keysAndValues.length; i += 2) {
            conf.put(keysAndValues[i], keysAndValues[i + 1]);
        }
        return new AnnotatorListener(conf::get, conf::keySet);
    }

    /** A job start whose properties() throws what it is given: another Spark's API, or a JVM in trouble. */
    private static final class JobStartFailing extends SparkListenerJobStart {
        private static final long serialVersionUID = 1L;
        private final transient Supplier<Error> failure;

        JobStartFailing(Supplier<Error> failure) {
            super(1, 1, seq(), new Properties());
            this.failure = failure;
        }

        @Override
        public Properties properties() {
            throw failure.get();
        }
    }

    @SuppressWarnings("unchecked")
    private static <T> scala.collection.Seq<T> seq() {
        return (scala.collection.Seq<T>) (Object) Nil$.MODULE$;
    }

    private static StageInfo stage(int id, int numTasks) {
        return new StageInfo(id, 0, "count at job.py:12", numTasks, seq(), seq(), "", null, seq(),
                Option.empty(), 0, false, 0);
    }

    private static SparkListenerTaskEnd taskEnd(int stageId, int index, long durationMs, String executor) {
        return taskEnd(stageId, index, durationMs, executor, Success$.MODULE$);
    }

    /** A task's metrics as the executor fills them (the setters are Spark-private, public in bytecode). */
    private static org.apache.spark.executor.TaskMetrics metrics(long runMs, long cpuNs, long gcMs, long deserializeMs,
                                                              long fetchWaitMs, long shuffleWriteNs) {
        org.apache.spark.executor.TaskMetrics m = new org.apache.spark.executor.TaskMetrics();
        m.setExecutorRunTime(runMs);
        m.setExecutorCpuTime(cpuNs);
        m.setJvmGCTime(gcMs);
        m.setExecutorDeserializeTime(deserializeMs);
        m.shuffleReadMetrics().setFetchWaitTime(fetchWaitMs);
        m.shuffleWriteMetrics().incWriteTime(shuffleWriteNs);
        return m;
    }

    private static SparkListenerTaskEnd taskEnd(int stageId, int index, long durationMs, String executor,
                                                org.apache.spark.TaskEndReason reason) {
        return taskEnd(stageId, index, durationMs, executor, reason, null);
    }

    private static SparkListenerTaskEnd taskEnd(int stageId, int index, long durationMs, String executor,
                                                org.apache.spark.TaskEndReason reason,
                                                org.apache.spark.executor.TaskMetrics metrics) {
        TaskInfo info = new TaskInfo(index, index, 0, index, 1300, executor, "host-" + executor,
                TaskLocality.ANY(), false);
        info.markFinished(org.apache.spark.TaskState.FINISHED(), 1300 + durationMs);
        return new SparkListenerTaskEnd(stageId, 0, "ResultTask", reason, info, null, metrics);
    }
}
