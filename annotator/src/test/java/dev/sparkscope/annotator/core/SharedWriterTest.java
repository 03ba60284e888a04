package dev.sparkscope.annotator.core;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** One writer per JVM and endpoint: shared by the parts, closed by the last, each part named in the log. */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class SharedWriterTest {

    private final List<String> warnings = Collections.synchronizedList(new ArrayList<>());
    private final List<String> infos = Collections.synchronizedList(new ArrayList<>());

    private Supplier<InfluxWriter> writerTo(FakeInflux influx) {
        return () -> {
            try {
                InfluxWriter.Settings s = new InfluxWriter.Settings();
                s.flushIntervalMs = 20;
                return new InfluxWriter(new HttpLineSender(influx.writeUrl(), null), s, warnings::add, infos::add,
                        null, null);
            } catch (java.io.IOException e) {
                throw new IllegalStateException(e);
            }
        };
    }

    private static long writerThreads() {
        return Thread.getAllStackTraces().keySet().stream()
                .filter(t -> t.isAlive() && t.getName().equals("sparkscope-writer")).count();
    }

    @Test
    void two_parts_of_one_jvm_share_one_writer_and_one_sender_thread() throws Exception {
        try (FakeInflux influx = FakeInflux.answering(204)) {
            long threadsBefore = writerThreads();
            int openBefore = SharedWriter.openWriters();
            SharedWriter.Handle listener = SharedWriter.open(influx.baseUrl(), writerTo(influx),
                    "sparkscope annotator", "annotation line");
            SharedWriter.Handle container = SharedWriter.open(influx.baseUrl(), writerTo(influx),
                    "sparkscope container memory", "container sample");
            assertSame(listener.writer(), container.writer());
            assertEquals(openBefore + 1, SharedWriter.openWriters());
            assertEquals(threadsBefore + 1, writerThreads());
            listener.enqueue("a v=1i 1");
            container.enqueue("b v=2i 2");
            Await.until(() -> influx.lines().size() == 2);
            assertEquals(Arrays.asList("a v=1i 1", "b v=2i 2"), influx.lines());
            listener.close(1000);
            container.close(1000);
        }
    }

    @Test
    void closing_one_part_keeps_the_other_writing_and_the_last_close_flushes_and_stops() throws Exception {
        try (FakeInflux influx = FakeInflux.answering(204)) {
            SharedWriter.Handle listener = SharedWriter.open(influx.baseUrl(), writerTo(influx),
                    "sparkscope annotator", "annotation line");
            SharedWriter.Handle container = SharedWriter.open(influx.baseUrl(), writerTo(influx),
                    "sparkscope container memory", "container sample");
            InfluxWriter shared = listener.writer();
            listener.enqueue("last-of-listener v=1i 1");
            assertTrue(listener.close(1000));
            assertTrue(shared.isRunning(), "the container sampler still writes through it");
            container.enqueue("sample v=2i 2");
            Await.until(() -> influx.lines().size() == 2);

            container.enqueue("final-sample v=3i 3");
            assertTrue(container.close(5000), "the last close sends what is queued");
            assertFalse(shared.isRunning());
            assertTrue(influx.lines().contains("final-sample v=3i 3"), influx.lines().toString());
            // Closed twice is closed once: the count of users never goes below zero.
            assertTrue(listener.close(1000));
            // Each part's summary in its own words.
            assertTrue(infos.stream().anyMatch(m -> m.startsWith("sparkscope annotator: stopped: 1 annotation line "
                    + "written")), infos.toString());
            assertTrue(infos.stream().anyMatch(m -> m.startsWith("sparkscope container memory: stopped: "
                    + "2 container samples written")), infos.toString());

            // A part starting after the last close gets a fresh writer.
            SharedWriter.Handle later = SharedWriter.open(influx.baseUrl(), writerTo(influx), "sparkscope profiler",
                    "profile line");
            assertNotSame(shared, later.writer());
            later.close(1000);
        }
    }

    @Test
    void lines_that_could_not_be_written_are_reported_by_the_part_that_wrote_them() throws Exception {
        try (FakeInflux influx = FakeInflux.answering(400)) {
            SharedWriter.Handle listener = SharedWriter.open(influx.baseUrl(), writerTo(influx),
                    "sparkscope annotator", "annotation line");
            SharedWriter.Handle profiler = SharedWriter.open(influx.baseUrl(), writerTo(influx),
                    "sparkscope profiler", "profile line");
            profiler.enqueue("flame v=1i 1");
            Await.until(() -> !warnings.isEmpty());
            assertTrue(warnings.get(0).startsWith("sparkscope profiler: could not write 1 profile line "),
                    warnings.get(0));
            assertTrue(warnings.stream().noneMatch(m -> m.startsWith("sparkscope annotator")), warnings.toString());
            listener.close(1000);
            profiler.close(1000);
        }
    }

    @Test
    void different_endpoints_get_different_writers() throws Exception {
        try (FakeInflux one = FakeInflux.answering(204); FakeInflux two = FakeInflux.answering(204)) {
            SharedWriter.Handle a = SharedWriter.open(one.baseUrl(), writerTo(one), "a", "line");
            SharedWriter.Handle b = SharedWriter.open(two.baseUrl(), writerTo(two), "b", "line");
            assertNotSame(a.writer(), b.writer());
            a.close(1000);
            b.close(1000);
        }
    }

}
