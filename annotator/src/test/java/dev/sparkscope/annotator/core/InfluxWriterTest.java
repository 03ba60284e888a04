package dev.sparkscope.annotator.core;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.URL;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** Delivery: batching, retries, drops and shutdown, against a local HTTP server or a closed port. */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class InfluxWriterTest {

    private final List<String> warnings = Collections.synchronizedList(new ArrayList<>());
    private final List<String> infos = Collections.synchronizedList(new ArrayList<>());

    private InfluxWriter writer(URL url, String auth, InfluxWriter.Settings s) {
        return new InfluxWriter(new HttpLineSender(url, auth), s, warnings::add, infos::add);
    }

    private static InfluxWriter.Settings settings(int batchSize, long flushMs) {
        InfluxWriter.Settings s = new InfluxWriter.Settings();
        s.batchSize = batchSize;
        s.flushIntervalMs = flushMs;
        s.initialBackoffMs = 50;
        s.connectTimeoutMs = 500;
        s.readTimeoutMs = 2000;
        s.outageWaitMs = 0; // give up at once on a closed port; the outage wait has its own test
        return s;
    }

    private static URL closedUrl() throws IOException {
        return new URL("http://127.0.0.1:" + FakeInflux.closedPort() + "/write?db=spark&precision=ns");
    }

    @Test
    void happy_path_posts_the_exact_bytes_to_the_write_endpoint() throws Exception {
        try (FakeInflux influx = FakeInflux.answering(204)) {
            String auth = "Basic dTpw";
            InfluxWriter w = writer(influx.writeUrl(), auth, settings(3, 5000));
            w.start();
            String[] lines = {
                "sparkscope_job,applicationid=app-1,job_id=1,status=SUCCEEDED description=\"a \\\"b\\\"\" 1000",
                "sparkscope_job,applicationid=app-1,job_id=2,status=SUCCEEDED text=\"é😀\" 1001",
                "sparkscope_job,applicationid=app-1,job_id=3,status=FAILED text=\"x\\ny\" 1002",
            };
            for (String line : lines) {
                w.enqueue(line);
            }
            Await.until(() -> influx.requests().size() == 1);
            FakeInflux.Request r = influx.requests().get(0);
            assertEquals("POST", r.method);
            assertEquals("/write?db=spark&precision=ns", r.uri);
            assertEquals("text/plain; charset=utf-8", r.contentType);
            assertEquals(auth, r.authorization);
            assertArrayEquals((String.join("\n", lines) + "\n").getBytes(StandardCharsets.UTF_8), r.body);
            assertTrue(w.shutdown(2000));
            assertEquals(3, w.written());
            assertEquals(Collections.emptyList(), warnings);
            assertEquals(1, infos.size());
        }
    }

    @Test
    void lines_are_batched_by_size_and_sent_after_the_flush_interval() throws Exception {
        try (FakeInflux influx = FakeInflux.answering(204)) {
            InfluxWriter w = writer(influx.writeUrl(), null, settings(4, 300));
            for (int i = 0; i < 10; i++) {
                w.enqueue("m f=" + i + "i " + i);
            }
            long start = System.nanoTime();
            w.start();
            Await.until(() -> influx.lines().size() == 10);
            List<Integer> sizes = new ArrayList<>();
            for (FakeInflux.Request r : influx.requests()) {
                sizes.add(r.bodyText().split("\n").length);
            }
            assertEquals(Arrays.asList(4, 4, 2), sizes);
            long lastMs = TimeUnit.NANOSECONDS.toMillis(influx.requests().get(2).atNanos - start);
            assertTrue(lastMs >= 250, "a partial batch waits for the flush interval, sent after " + lastMs + " ms");
            w.shutdown(1000);
        }
    }

    @Test
    void enqueue_never_blocks_when_influxdb_is_down() throws Exception {
        InfluxWriter.Settings s = settings(10, 10);
        s.queueMaxBytes = 100 * InfluxWriter.cost("m f=1i 100000");
        InfluxWriter w = writer(closedUrl(), null, s);
        w.start();
        long start = System.nanoTime();
        for (int i = 0; i < 200_000; i++) {
            w.enqueue("m f=1i " + i);
        }
        long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
        assertTrue(ms < 3000, "200k enqueues took " + ms + " ms");
        assertEquals(200_000, w.accepted());
        assertTrue(w.droppedQueueFull() >= 200_000 - 100 - 10 * (w.batchesGivenUp() + 1),
                "dropped " + w.droppedQueueFull());
        assertTrue(w.pending().size() <= 100);
        w.shutdown(1000);
    }

    @Test
    void full_queue_drops_the_oldest_lines_and_counts_them() throws Exception {
        InfluxWriter.Settings s = settings(10, 10);
        s.queueMaxBytes = 5 * InfluxWriter.cost("line1");
        InfluxWriter w = writer(closedUrl(), null, s); // not started: nothing drains the queue
        for (int i = 1; i <= 8; i++) {
            w.enqueue("line" + i);
        }
        assertEquals(Arrays.asList("line4", "line5", "line6", "line7", "line8"), w.pending());
        assertEquals(3, w.droppedQueueFull());
        assertEquals(s.queueMaxBytes, w.queuedBytes());
    }

    @Test
    void the_queue_is_bounded_in_bytes_so_long_lines_cannot_hold_more_memory() throws Exception {
        InfluxWriter.Settings s = settings(10, 10);
        s.queueMaxBytes = 1 << 20;
        InfluxWriter w = writer(closedUrl(), null, s);
        char[] sql = new char[20_000];
        Arrays.fill(sql, 'x');
        String longLine = "sparkscope_query description=\"" + new String(sql) + "\" 1";
        for (int i = 0; i < 1000; i++) {
            w.enqueue(longLine);
        }
        long held = 0;
        for (String line : w.pending()) {
            held += InfluxWriter.cost(line);
        }
        assertTrue(held <= s.queueMaxBytes, "held " + held);
        assertEquals(held, w.queuedBytes());
        assertEquals(1000 - w.pending().size(), w.droppedQueueFull());
        assertTrue(w.pending().size() >= 20, "kept " + w.pending().size());
    }

    @Test
    void lines_dropped_while_the_application_runs_are_reported_then_and_not_only_at_shutdown() throws Exception {
        try (FakeInflux influx = FakeInflux.answering(204)) {
            InfluxWriter.Settings s = settings(10, 10);
            s.queueMaxBytes = 3 * InfluxWriter.cost("m f=1i 10");
            InfluxWriter w = writer(influx.writeUrl(), null, s); // started after the burst
            for (int i = 10; i < 30; i++) {
                w.enqueue("m f=1i " + i);
            }
            w.start();
            Await.until(() -> !warnings.isEmpty());
            assertTrue(warnings.get(0).contains("17 annotation lines dropped"), warnings.get(0));
            assertTrue(warnings.get(0).contains(SinkConfig.QUEUE_MAX_BYTES), warnings.get(0));
            w.shutdown(1000);
        }
    }

    @Test
    void a_partial_write_keeps_the_good_lines_and_counts_only_the_refused_ones_as_lost() throws Exception {
        String influxBody = "{\"error\":\"partial write: unable to parse 'bad': missing fields dropped=1\"}";
        // As Telegraf 1.37's influxdb_listener answers (tests/test_annotator_scheduler.py checks the real one).
        String telegrafBody = "{\"error\":\"metric parse error: expected field at 2:9: \\\"b,t=x f=\\\" "
                + "(and 2 other parse errors)\"}";
        assertEquals(1, InfluxWriter.rejectedLines(new HttpLineSender.Response(400, influxBody), 5));
        assertEquals(3, InfluxWriter.rejectedLines(new HttpLineSender.Response(400, telegrafBody), 5));
        assertEquals(-1, InfluxWriter.rejectedLines(new HttpLineSender.Response(400, "{\"error\":\"bad\"}"), 5));
        try (FakeInflux influx = new FakeInflux(n -> new HttpLineSender.Response(400, influxBody))) {
            InfluxWriter w = writer(influx.writeUrl(), null, settings(5, 10));
            w.start();
            for (int i = 0; i < 5; i++) {
                w.enqueue("m f=1i " + i);
            }
            Await.until(() -> w.written() == 4);
            assertEquals(1, w.linesGivenUp());
            assertEquals(0, w.batchesGivenUp());
            assertEquals(1, influx.requests().size(), "a partial write is not retried");
            w.shutdown(1000);
        }
    }

    @Test
    void connection_errors_are_retried_with_exponential_backoff_then_the_batch_is_given_up() throws Exception {
        InfluxWriter.Settings s = settings(100, 10);
        s.maxAttempts = 4;
        s.initialBackoffMs = 100;
        try (FakeInflux influx = FakeInflux.answering(503)) {
            InfluxWriter w = writer(influx.writeUrl(), null, s);
            w.start();
            w.enqueue("m f=1i 1");
            Await.until(() -> w.batchesGivenUp() == 1 && warnings.size() == 1);
            List<FakeInflux.Request> r = influx.requests();
            assertEquals(4, r.size());
            long[] gaps = new long[3];
            for (int i = 0; i < 3; i++) {
                gaps[i] = TimeUnit.NANOSECONDS.toMillis(r.get(i + 1).atNanos - r.get(i).atNanos);
            }
            assertTrue(gaps[0] >= 90 && gaps[1] >= 190 && gaps[2] >= 390, "gaps " + Arrays.toString(gaps));
            assertTrue(gaps[2] < 2000, "gaps " + Arrays.toString(gaps));
            assertEquals(1, w.linesGivenUp());
            assertEquals(1, warnings.size());
            assertTrue(warnings.get(0).contains("HTTP 503"), warnings.get(0));
            w.shutdown(1000);
        }
    }

    @Test
    void a_listener_restart_of_several_seconds_loses_nothing_with_the_default_settings() throws Exception {
        // The settings a user gets (no spark.sparkscope.* key set), against Telegraf's
        // events port going away for 6 s (a restart, a config change) while the app runs.
        InfluxWriter.Settings s = InfluxWriter.Settings.from(SinkConfig.parse(key -> null));
        int port = FakeInflux.closedPort();
        InfluxWriter w = writer(new URL("http://127.0.0.1:" + port + "/write?db=spark&precision=ns"), null, s);
        w.start();
        long restartedAt = System.nanoTime() + TimeUnit.SECONDS.toNanos(6);
        int sent = 0;
        while (System.nanoTime() < restartedAt) {
            w.enqueue("sparkscope_stage,applicationid=app-1,stage_id=" + sent + " status=\"COMPLETED\" " + sent);
            sent++;
            Thread.sleep(100);
        }
        try (FakeInflux telegraf = new FakeInflux(port, n -> new HttpLineSender.Response(204, ""))) {
            int total = sent;
            Await.until(() -> telegraf.lines().size() >= total || w.linesGivenUp() > 0 && w.queuedBytes() == 0);
            assertEquals(0, w.linesGivenUp(), "lines given up: " + warnings);
            assertEquals(0, w.droppedQueueFull());
            assertEquals(total, telegraf.lines().size());
            assertTrue(w.shutdown(2000));
        }
    }

    @Test
    void a_temporary_server_error_is_retried_and_the_batch_arrives() throws Exception {
        try (FakeInflux influx = new FakeInflux(n -> new HttpLineSender.Response(n == 0 ? 503 : 204, ""))) {
            InfluxWriter w = writer(influx.writeUrl(), null, settings(10, 10));
            w.start();
            w.enqueue("m f=1i 1");
            Await.until(() -> w.written() == 1);
            assertEquals(2, influx.requests().size());
            assertEquals(0, w.batchesGivenUp());
            assertTrue(w.shutdown(1000));
            assertEquals(Collections.emptyList(), warnings);
        }
    }

    @Test
    void a_client_error_is_not_retried_and_the_warning_says_what_to_do() throws Exception {
        String body = "{\"error\":\"database not found: \\\"spark\\\"\"}";
        try (FakeInflux influx = new FakeInflux(n -> new HttpLineSender.Response(404, body))) {
            InfluxWriter w = writer(influx.writeUrl(), null, settings(10, 10));
            w.start();
            w.enqueue("m f=1i 1");
            Await.until(() -> w.batchesGivenUp() == 1 && warnings.size() == 1);
            assertEquals(1, influx.requests().size());
            assertEquals(1, warnings.size());
            assertTrue(warnings.get(0).contains("database not found"), warnings.get(0));
            assertTrue(warnings.get(0).contains(SinkConfig.DATABASE), warnings.get(0));
            w.shutdown(1000);
        }
    }

    @Test
    void repeated_failures_log_one_warning_not_one_per_event() throws Exception {
        InfluxWriter.Settings s = settings(1, 1);
        s.maxAttempts = 1;
        InfluxWriter w = writer(closedUrl(), null, s);
        w.start();
        for (int i = 0; i < 50; i++) {
            w.enqueue("m f=1i " + i);
        }
        Await.until(() -> w.batchesGivenUp() + w.droppedQueueFull() == 50 && !warnings.isEmpty());
        assertEquals(1, warnings.size(), warnings.toString());
        assertTrue(warnings.get(0).contains("not reachable"), warnings.get(0));
        assertTrue(warnings.get(0).contains(SinkConfig.URL_KEY), warnings.get(0));
        w.shutdown(1000);
        assertEquals(2, warnings.size(), "plus one summary at shutdown: " + warnings);
        assertTrue(warnings.get(1).contains("given up"), warnings.get(1));
    }

    @Test
    void rate_limited_warning_logs_again_after_its_interval_with_the_count_it_held_back() {
        List<String> log = new ArrayList<>();
        long[] now = {0};
        RateLimitedWarning warning = new RateLimitedWarning(log::add, 60_000, () -> now[0]);
        assertTrue(warning.warn(() -> "first"));
        now[0] = 1000;
        assertFalse(warning.warn(() -> "second"));
        now[0] = 30_000;
        assertFalse(warning.warn(() -> "third"));
        now[0] = 61_000;
        assertTrue(warning.warn(() -> "fourth"));
        assertEquals(Arrays.asList("first", "fourth (2 similar warnings not logged in the last 61 s)"), log);
    }

    @Test
    void shutdown_sends_what_is_queued_without_waiting_for_the_flush_interval() throws Exception {
        try (FakeInflux influx = FakeInflux.answering(204)) {
            InfluxWriter w = writer(influx.writeUrl(), null, settings(1000, 60_000));
            w.start();
            for (int i = 0; i < 5; i++) {
                w.enqueue("m f=" + i + "i " + i);
            }
            long start = System.nanoTime();
            assertTrue(w.shutdown(3000));
            long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
            assertEquals(5, influx.lines().size());
            assertTrue(ms < 1500, "shutdown took " + ms + " ms");
            assertFalse(w.isRunning());
        }
    }

    @Test
    void shutdown_respects_its_deadline_when_influxdb_accepts_but_never_answers() throws Exception {
        try (ServerSocket silent = new ServerSocket(0, 50, InetAddress.getByName("127.0.0.1"))) {
            List<Socket> held = Collections.synchronizedList(new ArrayList<>());
            Thread acceptor = new Thread(() -> {
                try {
                    while (true) {
                        held.add(silent.accept());
                    }
                } catch (IOException closed) {
                    // test over
                }
            });
            acceptor.setDaemon(true);
            acceptor.start();
            InfluxWriter.Settings s = settings(10, 10);
            s.readTimeoutMs = 30_000;
            InfluxWriter w = writer(new URL("http://127.0.0.1:" + silent.getLocalPort() + "/write?db=spark"), null, s);
            w.start();
            w.enqueue("m f=1i 1");
            Await.until(() -> !held.isEmpty());
            long start = System.nanoTime();
            assertFalse(w.shutdown(500));
            long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
            assertTrue(ms >= 450 && ms < 1500, "shutdown took " + ms + " ms");
            assertTrue(warnings.get(warnings.size() - 1).contains("stopped waiting"), warnings.toString());
            for (Socket socket : held) {
                socket.close();
            }
        }
    }

    @Test
    void shutdown_with_influxdb_down_gives_up_quickly_instead_of_retrying_every_batch() throws Exception {
        InfluxWriter.Settings s = settings(10, 60_000);
        s.maxAttempts = 5;
        s.initialBackoffMs = 1000;
        InfluxWriter w = writer(closedUrl(), null, s);
        for (int i = 0; i < 1000; i++) {
            w.enqueue("m f=1i " + i);
        }
        w.start();
        long start = System.nanoTime();
        assertFalse(w.shutdown(5000));
        long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
        assertTrue(ms < 2000, "shutdown took " + ms + " ms");
        assertEquals(1000, w.linesGivenUp() + w.discardedAtShutdown());
        assertFalse(w.isRunning());
    }

    @Test
    void lines_enqueued_after_shutdown_are_ignored() throws Exception {
        try (FakeInflux influx = FakeInflux.answering(204)) {
            InfluxWriter w = writer(influx.writeUrl(), null, settings(10, 10));
            w.start();
            assertTrue(w.shutdown(1000));
            w.enqueue("m f=1i 1");
            assertEquals(0, w.accepted());
            assertEquals(1, w.discardedAtShutdown());
        }
    }

    @Test
    void credentials_in_the_url_are_never_logged() {
        assertEquals("http://***@influx:8086/write", InfluxWriter.redact("http://user:secret@influx:8086/write"));
        assertEquals("http://influx:8086/write", InfluxWriter.redact("http://influx:8086/write"));
    }

}
