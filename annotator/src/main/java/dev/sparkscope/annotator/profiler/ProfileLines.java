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
 * One profile as line protocol, in the layout of sparkscope/profiles/store.py:
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

    private static String quoted(String s) {
        return "\"" + Point.escapeStringField(s) + "\"";
    }

    /** Python's "{:g}" for the values used here: 30 -> "30", 2.5 -> "2.5". */
    static String seconds(double s) {
        if (s == Math.rint(s) && Math.abs(s) < 1e15) {
            return Long.toString((long) s);
        }
        return Double.toString(s);
    }

    static List<String> lines(String appId, String executorId, String kind, long startMs, double seconds,
                              String stage, int slot, List<NestedSet.Row> rows, long samples, String unit) {
        List<String> out = new ArrayList<>(rows.size() + 1);
        if (rows.isEmpty()) {
            return out;
        }
        String app = Point.escapeKey(Point.sanitizeTagValue(appId));
        String tags = Schema.Flame.APPLICATIONID + "=" + app + "," + Schema.Flame.EXECUTORID + "="
                + Point.escapeKey(Point.sanitizeTagValue(executorId)) + "," + Schema.Flame.KIND + "="
                + Point.escapeKey(kind);
        String pid = quoted(profileId(executorId, kind, startMs, seconds, stage));
        long base = startMs * 1_000_000L + slot * SLOT_NS;
        for (int i = 0; i < rows.size() && i < SLOT_NS; i++) {
            NestedSet.Row r = rows.get(i);
            out.add(ROWS + "," + tags + " " + Schema.Flame.LEVEL + "=" + r.level + "i," + Schema.Flame.VALUE + "="
                    + r.value + "i," + Schema.Flame.SELF + "=" + r.self + "i," + Schema.Flame.LABEL + "="
                    + quoted(r.label) + "," + Schema.Flame.PROFILE + "=" + pid + " " + (base + i));
        }
        out.add(PROFILES + "," + Schema.Profiles.APPLICATIONID + "=" + app + "," + Schema.Profiles.KIND + "="
                + Point.escapeKey(kind) + " " + Schema.Profiles.PROFILE + "=" + pid
                + "," + Schema.Profiles.EXECUTORID + "=" + quoted(executorId) + "," + Schema.Profiles.STAGE + "="
                + quoted(stage == null ? "" : stage) + "," + Schema.Profiles.SECONDS + "=" + seconds + ","
                + Schema.Profiles.SAMPLES + "=" + samples + "i," + Schema.Profiles.UNIT + "=" + quoted(unit) + ","
                + Schema.Profiles.TOP + "=" + quoted(NestedSet.widestLeaf(rows)) + " " + base);
        return out;
    }
}
