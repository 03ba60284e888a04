package dev.sparkscope.annotator.profiler;

import dev.sparkscope.annotator.core.Point;
import dev.sparkscope.annotator.core.Schema;

import java.text.SimpleDateFormat;
import java.util.ArrayList;
import java.util.Date;
import java.util.List;
import java.util.Locale;
import java.util.TimeZone;

/**
 * One profile as line protocol, through Point, in the layout of sparkscope/store/profiles.py:
 * sparkscope_flame rows (tags applicationid, executorid, kind; fields level,
 * value, self, label, profile), stamped start + slot * 100 ms + row index in
 * nanoseconds so they come back in depth-first order, and one
 * sparkscope_profiles point that indexes the profile.
 */
final class ProfileLines {

    static final String ROWS = Schema.Flame.NAME;
    static final String PROFILES = Schema.Profiles.NAME;
    static final long SLOT_NS = 100_000_000L;

    private ProfileLines() {
    }

    /** "2026-11-23 18:40:05 exec 1 cpu 30s all threads": readable and unique. */
    static String profileId(String executorId, String kind, long startMs, double seconds, String stage) {
        SimpleDateFormat f = new SimpleDateFormat("yyyy-MM-dd HH:mm:ss", Locale.ROOT);
        f.setTimeZone(TimeZone.getTimeZone("UTC"));
        return f.format(new Date(startMs)) + " exec " + executorId + " " + kind + " " + seconds(seconds) + "s "
                + (stage == null || stage.isEmpty() ? "all threads" : stage);
    }

    /**
     * A profile's length in its id: the float as line protocol writes it
     * ({@link Point#floatText}) without a whole number's ".0": 30 -> "30",
     * 2.5 -> "2.5", as store/profiles.py's seconds_text.
     */
    static String seconds(double s) {
        String text = Point.floatText(s);
        return text.endsWith(".0") ? text.substring(0, text.length() - 2) : text;
    }

    static List<String> lines(String appId, String executorId, String kind, long startMs, double seconds,
                              String stage, int slot, List<NestedSet.Row> rows, long samples, String unit) {
        List<String> out = new ArrayList<>(rows.size() + 1);
        if (rows.isEmpty()) {
            return out;
        }
        String pid = profileId(executorId, kind, startMs, seconds, stage);
        long base = startMs * 1_000_000L + slot * SLOT_NS;
        for (int i = 0; i < rows.size() && i < SLOT_NS; i++) {
            NestedSet.Row r = rows.get(i);
            out.add(Point.measurement(ROWS).tag(Schema.Flame.APPLICATIONID, appId)
                    .tag(Schema.Flame.EXECUTORID, executorId).tag(Schema.Flame.KIND, kind)
                    .field(Schema.Flame.LEVEL, (long) r.level).field(Schema.Flame.VALUE, r.value)
                    .field(Schema.Flame.SELF, r.self).field(Schema.Flame.LABEL, r.label)
                    .field(Schema.Flame.PROFILE, pid).timeNs(base + i).toLine());
        }
        out.add(Point.measurement(PROFILES).tag(Schema.Profiles.APPLICATIONID, appId).tag(Schema.Profiles.KIND, kind)
                .field(Schema.Profiles.PROFILE, pid).field(Schema.Profiles.EXECUTORID, executorId)
                .field(Schema.Profiles.STAGE, stage == null ? "" : stage).field(Schema.Profiles.SECONDS, seconds)
                .field(Schema.Profiles.SAMPLES, samples).field(Schema.Profiles.UNIT, unit)
                .field(Schema.Profiles.TOP, NestedSet.widestLeaf(rows)).timeNs(base).toLine());
        return out;
    }
}
