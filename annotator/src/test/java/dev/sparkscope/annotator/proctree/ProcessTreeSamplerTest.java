package dev.sparkscope.annotator.proctree;

import dev.sparkscope.annotator.core.FakeInflux;
import dev.sparkscope.annotator.core.InfluxLineReader;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/** The sampler writes Spark's three measurements as Spark's sink would, and passes its peaks on. */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class ProcessTreeSamplerTest {

    @TempDir
    Path proc;

    private final Map<String, String> conf = new HashMap<>();
    private final List<long[]> sent = new CopyOnWriteArrayList<>();

    private void write(String path, String text) throws IOException {
        Path p = proc.resolve(path);
        Files.createDirectories(p.getParent());
        Files.write(p, text.getBytes(StandardCharsets.UTF_8));
    }

    /** A JVM (100, 1000 pages) with one Python worker (200) and one other child (300). */
    private void tree(long jvmPages, long pythonPages) throws IOException {
        write("100/statm", "1 " + jvmPages + " 0 0 0 0 0\n");
        write("100/task/100/children", "200 300");
        write("200/comm", "python3\n");
        write("200/statm", "1 " + pythonPages + " 0 0 0 0 0\n");
        write("200/task/200/children", "");
        write("300/comm", "bash\n");
        write("300/statm", "1 3 0 0 0 0 0\n");
        write("300/task/300/children", "");
        if (!Files.exists(proc.resolve("self"))) {
            Files.createSymbolicLink(proc.resolve("self"), Paths.get("100"));
        }
    }

    @Test
    void each_poll_writes_the_three_sizes_under_spark_s_names_and_tags() throws Exception {
        tree(1000, 200);
        try (FakeInflux influx = FakeInflux.answering(204)) {
            conf.put("spark.sparkscope.influx.url", influx.baseUrl());
            conf.put("spark.sparkscope.flushIntervalMs", "20");
            conf.put(ProcessTreeSampler.POLLING_INTERVAL, "100ms");
            ProcessTreeSampler sampler = ProcessTreeSampler.start(conf::get, "3", "app-1", sent::add, proc);
            assertNotNull(sampler);
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
            while (influx.lines().size() < 3 && System.nanoTime() < deadline) {
                Thread.sleep(10);
            }
            sampler.stop();
            List<String> lines = new ArrayList<>(influx.lines());
            InfluxLineReader jvm = InfluxLineReader.points(lines, "ProcessTreeJVMRSSMemory").get(0);
            assertEquals("app-1", jvm.tags.get("applicationid"));
            assertEquals("3", jvm.tags.get("executorid"));
            assertEquals(2, jvm.tags.size(), "only the readers' tags");
            jvm.assertFields("value", String.valueOf(1000 * 4096)); // a float: no "i"
            InfluxLineReader.points(lines, "ProcessTreePythonRSSMemory").get(0)
                    .assertFields("value", String.valueOf(200 * 4096));
            InfluxLineReader.points(lines, "ProcessTreeOtherRSSMemory").get(0)
                    .assertFields("value", String.valueOf(3 * 4096));
            assertArrayEquals(new long[] {1000 * 4096, 200 * 4096, 3 * 4096}, sent.get(0));
        }
    }

    /** A sampler of executor 3 polling every 2 s, heartbeat 10 s, writing to influx; sample() is called by hand. */
    private ProcessTreeSampler pollingEvery2s(FakeInflux influx) {
        conf.put("spark.sparkscope.influx.url", influx.baseUrl());
        dev.sparkscope.annotator.core.SinkConfig c = dev.sparkscope.annotator.core.SinkConfig.parse(conf::get);
        return new ProcessTreeSampler(ProcessTree.locate(proc, new String[1]),
                dev.sparkscope.annotator.core.SharedWriter.open(c, "test", "line"), c, "app-1", "3", 2000, 10_000,
                sent::add);
    }

    @Test
    void peaks_go_on_at_each_new_high_and_once_a_heartbeat_otherwise() throws Exception {
        tree(1000, 200);
        try (FakeInflux influx = FakeInflux.answering(204)) {
            ProcessTreeSampler s = pollingEvery2s(influx);
            s.sample(0);                 // the first reading: a new high, sent
            tree(900, 100);              // lower: kept for the heartbeat
            s.sample(2_000);
            tree(950, 150);
            s.sample(4_000);
            assertEquals(1, sent.size());
            s.sample(10_000);            // a heartbeat interval since the window opened: the window goes
            assertEquals(2, sent.size());
            assertArrayEquals(new long[] {950 * 4096, 150 * 4096, 3 * 4096}, sent.get(1));
            tree(1100, 100);             // a new JVM high: sent at once
            s.sample(11_000);
            assertEquals(3, sent.size());
            assertEquals(1100 * 4096, sent.get(2)[0]);
            assertArrayEquals(new long[] {1100 * 4096, 200 * 4096, 3 * 4096}, s.high());
            s.stop();
        }
    }

    @Test
    void polls_every_2_s_write_every_4_s_and_every_poll_counts_for_the_peaks() throws Exception {
        tree(1000, 200);
        try (FakeInflux influx = FakeInflux.answering(204)) {
            ProcessTreeSampler s = pollingEvery2s(influx);
            for (long now = 0; now <= 10_000; now += 2000) {
                tree(now == 2000 ? 5000 : 1000, 200);   // the JVM's peak falls between two writes
                s.sample(now);
            }
            s.stop();
            List<Long> times = new ArrayList<>();
            for (InfluxLineReader p : InfluxLineReader.points(new ArrayList<>(influx.lines()),
                    "ProcessTreeJVMRSSMemory")) {
                times.add(p.time / 1_000_000);
            }
            assertEquals(java.util.Arrays.asList(0L, 4000L, 8000L), times);
            assertEquals(5000 * 4096, s.high()[0], "the peak of an unwritten poll");
            assertEquals(5000 * 4096, sent.get(1)[0], "and sent on as a new high");
        }
    }

    @Test
    void with_spark_s_own_process_tree_metrics_on_it_stays_off() throws Exception {
        tree(1000, 200);
        conf.put(ProcessTreeSampler.SPARK_PROCESS_TREE, "true");
        assertNull(ProcessTreeSampler.start(conf::get, "3", "app-1", sent::add, proc));
    }

    @Test
    void without_proc_it_stays_off() {
        assertNull(ProcessTreeSampler.start(conf::get, "3", "app-1", sent::add, proc.resolve("none")));
    }

    @Test
    void spark_time_settings_are_read_as_spark_reads_them() {
        assertEquals(2000, ProcessTreeSampler.millis("2s", 0));
        assertEquals(500, ProcessTreeSampler.millis("500ms", 0));
        assertEquals(1500, ProcessTreeSampler.millis("1500", 0));
        assertEquals(60_000, ProcessTreeSampler.millis("1min", 0));
        assertEquals(7, ProcessTreeSampler.millis(null, 7));
        assertTrue(ProcessTreeSamplerTest.refuses("two seconds"));
    }

    private static boolean refuses(String text) {
        try {
            ProcessTreeSampler.millis(text, 0);
            return false;
        } catch (IllegalArgumentException expected) {
            return true;
        }
    }
}
