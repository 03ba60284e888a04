package dev.sparkscope.annotator.events;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Arrays;
import java.util.Random;
import java.util.function.LongSupplier;

import org.junit.jupiter.api.Test;

/** Percentiles from the bounded histogram against exact nearest-rank percentiles of the same data. */
class DurationHistogramTest {

    private static final double[] FRACTIONS = {0.0, 0.01, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 1.0};

    @Test
    void durations_below_128_ms_give_exact_percentiles() {
        Random r = new Random(1);
        checkAgainstExact(2001, () -> r.nextInt(128), 0.0);
    }

    @Test
    void uniform_durations_give_percentiles_within_0_8_percent() {
        Random r = new Random(2);
        checkAgainstExact(10_000, () -> 100 + r.nextInt(60_000), 1.0 / 128);
    }

    @Test
    void log_normal_durations_give_percentiles_within_0_8_percent() {
        Random r = new Random(3);
        checkAgainstExact(50_000, () -> (long) Math.exp(7 + 1.5 * r.nextGaussian()), 1.0 / 128);
    }

    @Test
    void one_straggler_among_even_tasks_shows_in_max_but_not_in_median() {
        DurationHistogram h = new DurationHistogram();
        for (int i = 0; i < 199; i++) {
            h.record(1000 + i);
        }
        h.record(45_000);
        assertEquals(45_000, h.max());
        assertEquals(1000, h.min());
        long p50 = h.percentile(0.5);
        assertTrue(Math.abs(p50 - 1099) <= 1099 / 128.0, "p50=" + p50);
        assertTrue(h.percentile(0.95) < 1200, "p95 must ignore the one straggler");
    }

    @Test
    void a_single_task_is_every_percentile() {
        DurationHistogram h = new DurationHistogram();
        h.record(123_457);
        for (double f : FRACTIONS) {
            assertEquals(123_457, h.percentile(f));
        }
    }

    @Test
    void empty_histogram_reports_zeros() {
        DurationHistogram h = new DurationHistogram();
        assertEquals(0, h.count());
        assertEquals(0, h.max());
        assertEquals(0, h.percentile(0.5));
    }

    @Test
    void negative_durations_count_as_zero_and_huge_ones_are_capped() {
        DurationHistogram h = new DurationHistogram();
        h.record(-5);
        h.record(Long.MAX_VALUE);
        assertEquals(0, h.min());
        assertEquals(DurationHistogram.MAX_TRACKED, h.max());
        assertEquals(2, h.count());
    }

    @Test
    void memory_stays_bounded_however_many_tasks_a_stage_has() {
        DurationHistogram h = new DurationHistogram();
        // One duration in every bucket range there is: everything that can be allocated is.
        for (long v = 1; v <= DurationHistogram.MAX_TRACKED; v = v * 2 + 1) {
            h.record(v);
        }
        h.record(0);
        int full = h.allocatedBytes();
        assertTrue(full > 8 * 1024, "every power of two allocated: " + full);
        Random r = new Random(4);
        for (int i = 0; i < 2_000_000; i++) {
            h.record((long) Math.exp(r.nextDouble() * 28)); // 1 ms .. 45 years
        }
        h.record(Long.MAX_VALUE);
        assertEquals(2_000_000 + 2 + 41, h.count(), "counted");
        assertEquals(full, h.allocatedBytes(), "two million more tasks allocate nothing more");
        assertTrue(full <= 10 * 1024, "bound is " + full);
    }

    @Test
    void typical_stage_allocates_only_a_few_buckets() {
        DurationHistogram h = new DurationHistogram();
        for (int i = 0; i < 10_000; i++) {
            h.record(2000 + (i % 1000));
        }
        assertTrue(h.allocatedBytes() <= 2 * 64 * Integer.BYTES, "allocated " + h.allocatedBytes());
    }

    private static void checkAgainstExact(int n, LongSupplier values, double relativeError) {
        DurationHistogram h = new DurationHistogram();
        long[] data = new long[n];
        for (int i = 0; i < n; i++) {
            data[i] = values.getAsLong();
            h.record(data[i]);
        }
        Arrays.sort(data);
        assertEquals(data[0], h.min());
        assertEquals(data[n - 1], h.max());
        for (double f : FRACTIONS) {
            long exact = data[(int) Math.max(0, Math.ceil(f * n) - 1)];
            long estimate = h.percentile(f);
            assertTrue(Math.abs(estimate - exact) <= exact * relativeError,
                    "p" + (f * 100) + ": exact " + exact + ", histogram " + estimate);
        }
    }
}
