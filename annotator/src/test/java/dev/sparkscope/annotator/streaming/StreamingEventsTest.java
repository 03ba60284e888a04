package dev.sparkscope.annotator.streaming;

import dev.sparkscope.annotator.core.InfluxLineReader;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.junit.jupiter.api.Test;

/**
 * Kafka's backlog as the annotator reads it from a progress' sources. The
 * sources are built from kafka-progress-sources.json: the "sources" of a
 * StreamingQueryProgress as Spark prints it (progress.scala's SourceProgress
 * jsonValue), two Kafka topics and a rate source. SourceProgress.metrics is a
 * java.util.Map of strings, which Spark's Kafka source fills with min, max and
 * avg offsets behind the latest (KafkaMicroBatchStream.metrics).
 */
class StreamingEventsTest {

    /** What the annotator calls by reflection on Spark's SourceProgress: metrics(). */
    public static final class SourceProgress {
        private final Map<String, String> metrics;

        SourceProgress(Map<String, String> metrics) {
            this.metrics = metrics;
        }

        public Map<String, String> metrics() {
            return metrics;
        }
    }

    private final StreamingEvents events = new StreamingEvents(
            new StreamingQueries(line -> { }, () -> "app-1", false), message -> { });

    private static final Pattern METRICS = Pattern.compile("\"metrics\"\\s*:\\s*\\{([^}]*)\\}");
    private static final Pattern ENTRY = Pattern.compile("\"([^\"]+)\"\\s*:\\s*\"([^\"]*)\"");

    /** Each source's "metrics" object of Spark's JSON, as the Map SourceProgress.metrics() returns. */
    private static SourceProgress[] sourcesOf(String json) {
        List<SourceProgress> out = new ArrayList<>();
        Matcher m = METRICS.matcher(json);
        while (m.find()) {
            Map<String, String> metrics = new LinkedHashMap<>();
            Matcher e = ENTRY.matcher(m.group(1));
            while (e.find()) {
                metrics.put(e.group(1), e.group(2));
            }
            out.add(new SourceProgress(metrics));
        }
        return out.toArray(new SourceProgress[0]);
    }

    private static String resource(String name) throws IOException {
        try (InputStream in = StreamingEventsTest.class.getResourceAsStream(name)) {
            byte[] all = new byte[1 << 16];
            int n = 0;
            for (int r; (r = in.read(all, n, all.length - n)) > 0; ) {
                n += r;
            }
            return new String(all, 0, n, StandardCharsets.UTF_8);
        }
    }

    private static SourceProgress kafka(String maxBehind) {
        Map<String, String> metrics = new LinkedHashMap<>();
        metrics.put("avgOffsetsBehindLatest", "1.0");
        metrics.put("maxOffsetsBehindLatest", maxBehind);
        metrics.put("minOffsetsBehindLatest", "0");
        return new SourceProgress(metrics);
    }

    @Test
    void the_backlog_is_the_largest_max_offsets_behind_latest_of_the_kafka_sources() throws Exception {
        SourceProgress[] sources = sourcesOf(resource("kafka-progress-sources.json"));
        assertEquals(3, sources.length, "two Kafka topics and a rate source");
        assertEquals(Collections.emptyMap(), sources[2].metrics(), "the rate source reports no metrics");
        // orders: partition 1 is 1500 behind (43200 - 41700); payments: 40. Not the avg, not a sum.
        assertEquals(Long.valueOf(1500), events.offsetsBehindLatest(sources));
    }

    @Test
    void sources_that_report_no_backlog_give_none_not_zero() throws Exception {
        SourceProgress rate = new SourceProgress(Collections.<String, String>emptyMap());
        assertNull(events.offsetsBehindLatest(new SourceProgress[] {rate}));
        assertNull(events.offsetsBehindLatest(new SourceProgress[0]));
        assertNull(events.offsetsBehindLatest(null));
        assertEquals(Long.valueOf(0), events.offsetsBehindLatest(new SourceProgress[] {rate, kafka("0")}),
                "a Kafka source that keeps up is 0 behind: a value, not none");
    }

    @Test
    void offsets_past_two_to_the_53_are_kept_exact() throws Exception {
        // A double holds integers exactly only up to 2^53 = 9007199254740992.
        assertEquals(Long.valueOf(9_007_199_254_740_993L),
                events.offsetsBehindLatest(new SourceProgress[] {kafka("9007199254740993")}));
    }

    @Test
    void a_value_in_another_form_is_read_or_skipped_never_thrown() throws Exception {
        assertEquals(Long.valueOf(1500), events.offsetsBehindLatest(new SourceProgress[] {kafka("1500.0")}));
        assertEquals(Long.valueOf(7), events.offsetsBehindLatest(new SourceProgress[] {kafka("n/a"), kafka(" 7 ")}));
        assertNull(events.offsetsBehindLatest(new SourceProgress[] {kafka("NaN"), kafka("")}));
    }

    @Test
    void the_backlog_reaches_the_batch_point_as_an_integer_field() throws Exception {
        List<String> lines = new ArrayList<>();
        StreamingQueries queries = new StreamingQueries(lines::add, () -> "app-1", false);
        StreamingQueries.Progress p = new StreamingQueries.Progress();
        p.id = "q";
        p.runId = "run";
        p.name = "orders";
        p.timestampMs = 1_000;
        p.backlog = events.offsetsBehindLatest(sourcesOf(resource("kafka-progress-sources.json")));
        queries.progress(p);
        assertEquals("1500i", InfluxLineReader.read(lines.get(0)).fields.get("backlog"));
    }
}
