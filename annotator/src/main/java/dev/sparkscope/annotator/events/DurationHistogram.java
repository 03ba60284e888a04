package dev.sparkscope.annotator.events;

/**
 * Bounded histogram of millisecond durations, for percentiles of task times.
 *
 * <p>Durations below 128 ms are counted exactly. Above, every power of two
 * [2^k, 2^(k+1)) is split into 64 equal buckets, so a bucket is at most 1/64
 * of its lower bound wide and a reported percentile (the bucket's midpoint,
 * clamped to the exact min and max) is within 1/128 (0.8 %) of the true one.
 * Buckets are allocated per power of two on first use: a stage whose tasks
 * span a few powers of two costs about 1 KB, and no stage can cost more than
 * {@link #MAX_BYTES} however many tasks it has. Durations of 2^40 ms (35
 * years) and more are counted in the last bucket.
 */
final class DurationHistogram {

    private static final int SUB_BITS = 6;
    private static final int SUB_BUCKETS = 1 << SUB_BITS;           // 64
    private static final int EXACT_LIMIT = SUB_BUCKETS << 1;        // 128: first exponent is 7
    private static final int FIRST_EXP = SUB_BITS + 1;              // 7
    private static final int LAST_EXP = 40;
    private static final int OCTAVES = LAST_EXP - FIRST_EXP + 1;    // 34
    static final long MAX_TRACKED = (1L << (LAST_EXP + 1)) - 1;

    /** Upper bound of the memory held by the counts of one histogram. */
    static final int MAX_BYTES = (EXACT_LIMIT + OCTAVES * SUB_BUCKETS) * Integer.BYTES;

    private int[] exact;                                // lazily, values 0..127
    private final int[][] octaves = new int[OCTAVES][]; // lazily, per power of two
    private long count;
    private long min = Long.MAX_VALUE;
    private long max = Long.MIN_VALUE;

    void record(long durationMs) {
        long v = durationMs < 0 ? 0 : Math.min(durationMs, MAX_TRACKED);
        if (v < EXACT_LIMIT) {
            if (exact == null) {
                exact = new int[EXACT_LIMIT];
            }
            exact[(int) v]++;
        } else {
            int exp = 63 - Long.numberOfLeadingZeros(v);
            int sub = (int) ((v >>> (exp - SUB_BITS)) & (SUB_BUCKETS - 1));
            int[] octave = octaves[exp - FIRST_EXP];
            if (octave == null) {
                octave = new int[SUB_BUCKETS];
                octaves[exp - FIRST_EXP] = octave;
            }
            octave[sub]++;
        }
        count++;
        min = Math.min(min, v);
        max = Math.max(max, v);
    }

    long count() {
        return count;
    }

    /** Exact largest duration recorded, or 0 when empty. */
    long max() {
        return count == 0 ? 0 : max;
    }

    /** Exact smallest duration recorded, or 0 when empty. */
    long min() {
        return count == 0 ? 0 : min;
    }

    /**
     * Nearest-rank percentile: the smallest recorded duration that at least
     * {@code fraction} of all recorded durations do not exceed, within 0.8 %.
     * Returns 0 when empty.
     */
    long percentile(double fraction) {
        if (count == 0) {
            return 0;
        }
        long rank = (long) Math.ceil(fraction * count);
        rank = Math.max(1, Math.min(count, rank));
        long seen = 0;
        if (exact != null) {
            for (int v = 0; v < EXACT_LIMIT; v++) {
                seen += exact[v];
                if (seen >= rank) {
                    return clamp(v);
                }
            }
        }
        for (int o = 0; o < OCTAVES; o++) {
            int[] octave = octaves[o];
            if (octave == null) {
                continue;
            }
            int exp = o + FIRST_EXP;
            long width = 1L << (exp - SUB_BITS);
            for (int sub = 0; sub < SUB_BUCKETS; sub++) {
                seen += octave[sub];
                if (seen >= rank) {
                    long lower = (SUB_BUCKETS + sub) * width;
                    return clamp(lower + width / 2);
                }
            }
        }
        return max;
    }

    /** Bytes held by bucket counts right now (for the memory-bound test). */
    int allocatedBytes() {
        int n = exact == null ? 0 : exact.length;
        for (int[] octave : octaves) {
            n += octave == null ? 0 : octave.length;
        }
        return n * Integer.BYTES;
    }

    private long clamp(long v) {
        return Math.max(min, Math.min(max, v));
    }
}
