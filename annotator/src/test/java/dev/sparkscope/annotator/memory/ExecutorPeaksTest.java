package dev.sparkscope.annotator.memory;

import dev.sparkscope.annotator.core.InfluxLineReader;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

import org.junit.jupiter.api.Test;

class ExecutorPeaksTest {

    private final List<String> lines = new ArrayList<>();
    private final ExecutorPeaks peaks = new ExecutorPeaks(lines::add, () -> "app-1");

    private static long[] values(long heap, long execution, long rss) {
        long[] v = ExecutorPeaks.emptyPeaks();
        v[ExecutorPeaks.METRICS.indexOf("JVMHeapMemory")] = heap;
        v[ExecutorPeaks.METRICS.indexOf("OnHeapExecutionMemory")] = execution;
        v[ExecutorPeaks.METRICS.indexOf("ProcessTreeJVMRSSMemory")] = rss;
        return v;
    }

    private List<InfluxLineReader> points(String measurement) {
        return InfluxLineReader.points(lines, measurement);
    }

    @Test
    void each_metric_keeps_its_own_highest_value_across_heartbeats_and_task_ends() {
        peaks.stageSubmitted(3, 0, 7L);
        peaks.update("1", 3, 0, values(500, 10, 900));
        peaks.update("1", 3, 0, values(200, 80, 950)); // execution and RSS peak later than heap
        peaks.update("1", -1, -1, values(100, 0, 990)); // no stage: counts for the executor only
        peaks.stageCompleted(3, 0, "sum at job.py:9", "SUCCEEDED", 5_000);
        peaks.executorRemoved("1", 6_000);

        points(ExecutorPeaks.STAGE_PEAKS).get(0).assertFields("JVMHeapMemory", "500i", "OnHeapExecutionMemory", "80i",
                "ProcessTreeJVMRSSMemory", "950i", "execution_id", "7i", "stage_id", "3i");
        InfluxLineReader executor = points(ExecutorPeaks.EXECUTOR_PEAKS).get(0);
        executor.assertFields("ProcessTreeJVMRSSMemory", "990i", "executor_id", "1", "written_at", "removed");
        assertFalse(executor.fields.containsKey("MajorGCTime"), "a metric never reported is not written as a number");
    }

    @Test
    void one_task_s_own_execution_peak_is_kept_beside_the_polled_one() {
        // A task end carries no polled metrics when none was taken while it ran,
        // yet its TaskMetrics.peakExecutionMemory (counted on every acquire) still counts.
        peaks.stageSubmitted(2, 0, null);
        peaks.update("1", 2, 0, values(600, 256, 900)); // the polls saw 256
        long[] task = ExecutorPeaks.emptyPeaks();
        task[ExecutorPeaks.TASK_EXECUTION] = 354;
        peaks.update("1", 2, 0, task);
        task[ExecutorPeaks.TASK_EXECUTION] = 300; // a smaller task later lowers nothing
        peaks.update("1", 2, 0, task);
        peaks.stageCompleted(2, 0, "aggregate", "SUCCEEDED", 5_000);
        peaks.applicationEnded(6_000);

        for (String measurement : new String[] {ExecutorPeaks.STAGE_PEAKS, ExecutorPeaks.STAGE_EXECUTOR_PEAKS,
                ExecutorPeaks.EXECUTOR_PEAKS}) {
            InfluxLineReader p = points(measurement).get(0);
            assertEquals("354i", p.fields.get(ExecutorPeaks.TASK_PEAK_EXECUTION), measurement);
            assertEquals("256i", p.fields.get("OnHeapExecutionMemory"), measurement);
            assertEquals("600i", p.fields.get("JVMHeapMemory"), measurement);
        }
    }

    @Test
    void a_stage_reports_the_highest_executor_and_one_point_per_executor() {
        peaks.stageSubmitted(4, 1, null);
        peaks.update("1", 4, 1, values(300, 30, 1000));
        peaks.update("2", 4, 1, values(700, 20, 800));
        peaks.update("2", 5, 0, values(9_999, 9_999, 9_999)); // another stage, never submitted here
        peaks.stageCompleted(4, 1, "join", "SUCCEEDED", 5_000);

        InfluxLineReader stage = points(ExecutorPeaks.STAGE_PEAKS).get(0);
        stage.assertFields("JVMHeapMemory", "700i", "OnHeapExecutionMemory", "30i", "heap_peak_executor", "2",
                "execution_peak_executor", "1", "executors", "2i");
        assertFalse(stage.fields.containsKey("execution_id"));
        List<InfluxLineReader> perExecutor = points(ExecutorPeaks.STAGE_EXECUTOR_PEAKS);
        assertEquals(2, perExecutor.size());
        assertEquals("300i", perExecutor.get(0).fields.get("JVMHeapMemory"));
        assertEquals("1i", perExecutor.get(0).fields.get("attempt"));
        assertEquals(0, peaks.trackedStages());
    }

    @Test
    void only_the_application_id_is_a_tag_and_points_of_one_measurement_never_share_a_time() {
        for (int s = 0; s < 3; s++) {
            peaks.stageSubmitted(s, 0, null);
            peaks.update("1", s, 0, values(1, 1, 1));
            peaks.update("2", s, 0, values(2, 2, 2));
        }
        for (int s = 0; s < 3; s++) {
            peaks.stageCompleted(s, 0, "x", "SUCCEEDED", 5_000); // all in the same millisecond
        }
        peaks.applicationEnded(5_000);
        for (String m : new String[] {ExecutorPeaks.STAGE_PEAKS, ExecutorPeaks.STAGE_EXECUTOR_PEAKS,
                ExecutorPeaks.EXECUTOR_PEAKS}) {
            Set<Long> times = new HashSet<>();
            for (InfluxLineReader p : points(m)) {
                assertEquals(1, p.tags.size(), p.toString());
                assertEquals("app-1", p.tags.get("applicationid"));
                assertTrue(times.add(p.time), m + ": two points at " + p.time);
            }
        }
        assertEquals(3, points(ExecutorPeaks.STAGE_PEAKS).size());
        assertEquals(6, points(ExecutorPeaks.STAGE_EXECUTOR_PEAKS).size());
        assertEquals(2, points(ExecutorPeaks.EXECUTOR_PEAKS).size());
        assertEquals("application end", points(ExecutorPeaks.EXECUTOR_PEAKS).get(0).fields.get("written_at"));
    }

    @Test
    void a_stage_no_executor_reported_for_writes_nothing() {
        peaks.stageSubmitted(1, 0, null);
        peaks.stageCompleted(1, 0, "x", "SUCCEEDED", 1_000);
        peaks.applicationEnded(2_000);
        assertTrue(lines.isEmpty(), lines.toString());
    }

    @Test
    void the_memory_settings_of_the_run_are_written_as_set() {
        java.util.Map<String, String> conf = new java.util.HashMap<>();
        conf.put("spark.executor.memory", "2g");
        conf.put("spark.memory.fraction", "0.5");
        conf.put("spark.sql.shuffle.partitions", "7");
        peaks.applicationStarted(1_000, conf::get);
        InfluxLineReader p = points(ExecutorPeaks.MEMORY_CONF).get(0);
        p.assertFields("spark.executor.memory", "2g", "spark.memory.fraction", "0.5", "settings_set", "2i");
        assertFalse(p.fields.containsKey("spark.sql.shuffle.partitions"));
    }

    @Test
    void with_spark_s_process_tree_off_the_sampler_s_sizes_are_the_rss_peaks() {
        dev.sparkscope.annotator.core.ProcessTreePeaks tree = dev.sparkscope.annotator.core.ProcessTreePeaks.forTests();
        ExecutorPeaks p = new ExecutorPeaks(lines::add, () -> "app-1", tree);
        p.stageSubmitted(1, 0, null);
        tree.offer("1", new long[] {900, 300, 5});
        tree.offer("1", new long[] {800, 400, 5}); // the window keeps each size's highest
        // A heartbeat: Spark's process-tree fields are 0 (off); the window counts for its stage.
        long[] window = p.treeWindow("1", true);
        p.update("1", 1, 0, ExecutorPeaks.withTree(values(100, 10, 0), window));
        // Taken: nothing new since, so the level last sent (what a poll would see now).
        assertEquals(400, p.treeWindow("1", true)[1]);
        tree.offer("1", new long[] {2000, 10, 1}); // after the stage: the executor's alone
        p.stageCompleted(1, 0, "map", "SUCCEEDED", 5_000);
        p.applicationEnded(6_000);

        points(ExecutorPeaks.STAGE_PEAKS).get(0).assertFields("ProcessTreeJVMRSSMemory", "900i",
                "ProcessTreePythonRSSMemory", "400i", "ProcessTreeOtherRSSMemory", "5i");
        points(ExecutorPeaks.EXECUTOR_PEAKS).get(0).assertFields("ProcessTreeJVMRSSMemory", "2000i",
                "ProcessTreePythonRSSMemory", "400i", "ProcessTreeOtherRSSMemory", "5i");
        assertEquals(null, tree.run("1"), "forgotten once written");
    }
}
