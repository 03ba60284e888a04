package dev.sparkscope.annotator.core;

import java.util.LinkedHashMap;
import java.util.Map;
import java.util.TreeMap;

/**
 * One InfluxDB 1.x line-protocol point with a nanosecond timestamp (the
 * annotator stamps an entity at its start millisecond plus a sub-millisecond
 * offset of its own, so that entities starting in the same millisecond stay
 * distinct points: see AnnotationRecorder).
 *
 * <p>Escaping follows the InfluxDB 1.8 parser (models/points.go), not just the
 * documentation, so that every value reads back exactly as given:
 * <ul>
 *   <li>measurement: comma and space are escaped;</li>
 *   <li>tag keys, tag values, field keys: comma, equals sign and space are
 *       escaped; other backslashes stay literal (the parser keeps them). A tag
 *       value cannot end in a backslash (it would escape the separator), so
 *       trailing backslashes are removed; tags cannot hold line breaks, so
 *       CR, LF and TAB become spaces; a tag left empty is omitted (InfluxDB
 *       rejects empty tag values); every other control character also
 *       becomes a space;</li>
 *   <li>string field values: backslash and double quote are escaped; a line
 *       break is stored as the two characters {@code \n} ({@code \r} for CR),
 *       written as an escaped backslash and a letter, so a point always stays
 *       on one line and every line-protocol reader (Telegraf's too) accepts it;
 *       a tab is stored as {@code \t}; every other control character
 *       (Telegraf's parser rejects a form feed, for one) becomes a space.</li>
 * </ul>
 */
public final class Point {

    private static final char[] MEASUREMENT_SPECIAL = {',', ' '};
    private static final char[] KEY_SPECIAL = {',', ' ', '='};

    private final String measurement;
    // Sorted by key: InfluxDB's recommended order (it otherwise sorts on write).
    private final Map<String, String> tags = new TreeMap<>();
    private final Map<String, String> fields = new LinkedHashMap<>();
    private long timeNs;

    private Point(String measurement) {
        if (measurement == null || measurement.isEmpty()) {
            throw new IllegalArgumentException("measurement must not be empty");
        }
        this.measurement = measurement;
    }

    public static Point measurement(String measurement) {
        return new Point(measurement);
    }

    /** Adds a tag; a null value, or one that is empty once sanitised, is omitted. */
    public Point tag(String key, String value) {
        String clean = sanitizeTagValue(value);
        if (!clean.isEmpty()) {
            tags.put(escapeKey(key), escapeKey(clean));
        }
        return this;
    }

    /** Adds a string field; null is omitted, the empty string is kept. */
    public Point field(String key, String value) {
        if (value != null) {
            fields.put(escapeKey(key), "\"" + escapeStringField(value) + "\"");
        }
        return this;
    }

    public Point field(String key, long value) {
        fields.put(escapeKey(key), value + "i");
        return this;
    }

    /** Adds an integer field unless value is null. */
    public Point field(String key, Long value) {
        return value == null ? this : field(key, value.longValue());
    }

    /** Adds a float field; NaN and infinities are omitted (line protocol has no spelling for them). */
    public Point field(String key, double value) {
        if (!Double.isNaN(value) && !Double.isInfinite(value)) {
            fields.put(escapeKey(key), Double.toString(value));
        }
        return this;
    }

    /**
     * A float field in plain digits, rounded to a whole number (line protocol
     * reads a number without the "i" suffix as a float): exact up to 2^53,
     * where Double.toString switches to 1.0E7 notation at ten million.
     */
    public Point wholeFloatField(String key, double value) {
        if (!Double.isNaN(value) && !Double.isInfinite(value)) {
            fields.put(escapeKey(key), String.format(java.util.Locale.ROOT, "%.0f", value));
        }
        return this;
    }

    public Point field(String key, boolean value) {
        fields.put(escapeKey(key), value ? "true" : "false");
        return this;
    }

    public Point timeMs(long epochMs) {
        return timeNs(epochMs * 1_000_000L);
    }

    /** Nanoseconds since the epoch: the writer asks for precision=ns. */
    public Point timeNs(long epochNs) {
        this.timeNs = epochNs;
        return this;
    }

    /** The line without a trailing newline. */
    public String toLine() {
        if (fields.isEmpty()) {
            throw new IllegalStateException("a point needs at least one field: " + measurement);
        }
        StringBuilder sb = new StringBuilder(128);
        sb.append(escapeMeasurement(measurement));
        for (Map.Entry<String, String> t : tags.entrySet()) {
            sb.append(',').append(t.getKey()).append('=').append(t.getValue());
        }
        char sep = ' ';
        for (Map.Entry<String, String> f : fields.entrySet()) {
            sb.append(sep).append(f.getKey()).append('=').append(f.getValue());
            sep = ',';
        }
        sb.append(' ').append(timeNs);
        return sb.toString();
    }

    @Override
    public String toString() {
        return toLine();
    }

    static String escapeMeasurement(String s) {
        return escape(s, MEASUREMENT_SPECIAL);
    }

    /** For tag keys, tag values (after {@link #sanitizeTagValue}) and field keys. */
    public static String escapeKey(String s) {
        return escape(s, KEY_SPECIAL);
    }

    public static String sanitizeTagValue(String value) {
        if (value == null) {
            return "";
        }
        StringBuilder clean = new StringBuilder(value.length());
        for (int i = 0; i < value.length(); i++) {
            char c = value.charAt(i);
            clean.append(isControl(c) ? ' ' : c);
        }
        String s = clean.toString();
        int end = s.length();
        while (end > 0 && s.charAt(end - 1) == '\\') {
            end--;
        }
        return s.substring(0, end);
    }

    public static String escapeStringField(String s) {
        StringBuilder sb = null;
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            String rep;
            switch (c) {
                case '\\': rep = "\\\\"; break;
                case '"': rep = "\\\""; break;
                // An escaped backslash then a letter: stored as the two
                // characters \n by InfluxDB, and valid for strict parsers
                // (Telegraf's rejects a bare backslash before n or r).
                case '\n': rep = "\\\\n"; break;
                case '\r': rep = "\\\\r"; break;
                case '\t': rep = "\\\\t"; break;
                default: rep = isControl(c) ? " " : null;
            }
            if (rep != null) {
                if (sb == null) {
                    sb = new StringBuilder(s.length() + 16).append(s, 0, i);
                }
                sb.append(rep);
            } else if (sb != null) {
                sb.append(c);
            }
        }
        return sb == null ? s : sb.toString();
    }

    /** C0 controls and DEL: no line-protocol reader agrees on them, so none is written raw. */
    static boolean isControl(char c) {
        return c < 0x20 || c == 0x7f;
    }

    private static String escape(String s, char[] special) {
        StringBuilder sb = null;
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            boolean esc = false;
            for (char sp : special) {
                if (c == sp) {
                    esc = true;
                    break;
                }
            }
            if (esc) {
                if (sb == null) {
                    sb = new StringBuilder(s.length() + 8).append(s, 0, i);
                }
                sb.append('\\').append(c);
            } else if (sb != null) {
                sb.append(c);
            }
        }
        return sb == null ? s : sb.toString();
    }
}
