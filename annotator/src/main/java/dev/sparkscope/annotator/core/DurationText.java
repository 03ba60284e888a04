package dev.sparkscope.annotator.core;

import java.util.Locale;

/** Durations as people read them in an annotation: "850 ms", "12.3 s", "2 min 3 s", "1 h 5 min". */
public final class DurationText {

    private DurationText() {
    }

    public static String of(long ms) {
        if (ms < 0) {
            return "?";
        }
        if (ms < 1000) {
            return ms + " ms";
        }
        if (ms < 60_000) {
            return String.format(Locale.ROOT, "%.1f s", ms / 1000.0);
        }
        long s = ms / 1000;
        if (s < 3600) {
            return (s / 60) + " min " + (s % 60) + " s";
        }
        return (s / 3600) + " h " + ((s % 3600) / 60) + " min";
    }
}
