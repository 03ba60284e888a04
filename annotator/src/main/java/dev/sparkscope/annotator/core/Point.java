package dev.sparkscope.annotator.core;

import java.math.BigDecimal;
import java.math.MathContext;
import java.math.RoundingMode;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.TreeMap;

/**
 * One InfluxDB 1.x line-protocol point with a nanosecond timestamp (the
 * annotator stamps an entity at its start millisecond plus a sub-millisecond
 * offset of its own, so that entities starting in the same millisecond stay
 * distinct points: see AnnotationRecorder).
 *
 * <p>The rule is sparkscope's one line-protocol rule, the same as the Python
 * writers' (src/sparkscope/store/lineprotocol.py, whose docstring says what Telegraf
 * 1.37 and InfluxDB 1.13 accept and why), so an application id or a stage name
 * is stored under the same value whichever side wrote it. Both encoders are
 * held to the table tests/data/lineprotocol_cases.json (LineProtocolCasesTest):
 * <ul>
 *   <li>string field values: backslash and double quote escaped, every other
 *       character written as it is, line breaks and control characters too
 *       (Telegraf reads a quoted value up to its closing quote and refuses a
 *       backslash before n);</li>
 *   <li>tag keys, tag values and field keys: comma, equals sign and space
 *       escaped, other backslashes left as they are. Tab, LF, CR, form feed and
 *       vertical tab, which Telegraf refuses in a tag however escaped, become
 *       the two characters {@code \t}, {@code \n}, {@code \r}, {@code \f},
 *       {@code \v}; trailing backslashes, which would escape the separator,
 *       become U+29F5 (it looks the same). An empty or null tag is omitted;</li>
 *   <li>measurement: comma and space escaped, the same changes;</li>
 *   <li>floats: the shortest decimal that reads back as the same double, in
 *       Python's repr form (1.5, 0.0001, 1e-05, 1e+16: see {@link #floatText});
 *       NaN and infinities are omitted. Integers end in "i".</li>
 * </ul>
 */
public final class Point {

    private static final char[] MEASUREMENT_SPECIAL = {',', ' '};
    private static final char[] KEY_SPECIAL = {',', ' ', '='};
    /** Stands for a backslash that would end a name, key or tag value. */
    static final char TRAILING_BACKSLASH = '\u29f5';

    private final String measurement;
    // Sorted by key as given, InfluxDB's recommended order (it otherwise sorts on
    // write) and the Python writer's: key -> escaped value.
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

    /** Adds a tag; a null or empty value is omitted. */
    public Point tag(String key, String value) {
        if (value != null && !value.isEmpty()) {
            tags.put(checkedKey(key), escapeKey(value));
        }
        return this;
    }

    /** Adds a string field; null is omitted, the empty string is kept. */
    public Point field(String key, String value) {
        String k = escapeKey(checkedKey(key));
        if (value != null) {
            fields.put(k, "\"" + escapeStringField(value) + "\"");
        }
        return this;
    }

    public Point field(String key, long value) {
        fields.put(escapeKey(checkedKey(key)), value + "i");
        return this;
    }

    /** Adds an integer field unless value is null. */
    public Point field(String key, Long value) {
        checkedKey(key);
        return value == null ? this : field(key, value.longValue());
    }

    /** Adds a float field; NaN and infinities are omitted (line protocol has no spelling for them). */
    public Point field(String key, double value) {
        String k = escapeKey(checkedKey(key));
        if (!Double.isNaN(value) && !Double.isInfinite(value)) {
            fields.put(k, floatText(value));
        }
        return this;
    }

    /**
     * A float field rounded to a whole number, in plain digits (line protocol
     * reads a number without the "i" suffix as a float): a running total that
     * may pass a long's range. From 1e16 {@link #floatText} would write 1e+16;
     * InfluxDB stores the same double from either spelling.
     */
    public Point wholeFloatField(String key, double value) {
        String k = escapeKey(checkedKey(key));
        if (!Double.isNaN(value) && !Double.isInfinite(value)) {
            fields.put(k, String.format(java.util.Locale.ROOT, "%.0f", value));
        }
        return this;
    }

    public Point field(String key, boolean value) {
        fields.put(escapeKey(checkedKey(key)), value ? "true" : "false");
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
            sb.append(',').append(escapeKey(t.getKey())).append('=').append(t.getValue());
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

    public static String escapeMeasurement(String s) {
        return noTrailingBackslash(escape(s, MEASUREMENT_SPECIAL));
    }

    /** For tag keys, tag values and field keys. */
    public static String escapeKey(String s) {
        return noTrailingBackslash(escape(s, KEY_SPECIAL));
    }

    private static String checkedKey(String key) {
        if (key == null || key.isEmpty()) {
            throw new IllegalArgumentException("a tag or field key must not be empty");
        }
        return key;
    }

    public static String escapeStringField(String s) {
        StringBuilder sb = null;
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (c == '\\' || c == '"') {
                if (sb == null) {
                    sb = new StringBuilder(s.length() + 16).append(s, 0, i);
                }
                sb.append('\\').append(c);
            } else if (sb != null) {
                sb.append(c);
            }
        }
        return sb == null ? s : sb.toString();
    }

    /**
     * Python's repr of a finite double: the fewest significant digits that read
     * back as the same double (the nearer of the two candidates of that length
     * when both do), in plain notation from 1e-4 up to 1e16 with ".0" when whole,
     * else as 1.5e+16 / 1e-05. Double.toString is not the shortest on Java 8-18,
     * so the digits are found with BigDecimal.
     */
    public static String floatText(double value) {
        if (value == 0) {
            return Double.doubleToRawLongBits(value) < 0 ? "-0.0" : "0.0";
        }
        double magnitude = Math.abs(value);
        BigDecimal exact = new BigDecimal(magnitude);
        BigDecimal shortest = null;
        for (int digits = 1; shortest == null; digits++) {
            BigDecimal down = exact.round(new MathContext(digits, RoundingMode.DOWN));
            BigDecimal up = exact.round(new MathContext(digits, RoundingMode.UP));
            boolean downReads = down.doubleValue() == magnitude;
            boolean upReads = up.doubleValue() == magnitude;
            if (downReads && upReads) {
                int nearer = exact.subtract(down).compareTo(up.subtract(exact));
                shortest = nearer < 0 || (nearer == 0 && !down.unscaledValue().testBit(0)) ? down : up;
            } else if (downReads) {
                shortest = down;
            } else if (upReads) {
                shortest = up;
            }
        }
        shortest = shortest.stripTrailingZeros();
        String d = shortest.unscaledValue().toString();
        int point = d.length() - shortest.scale(); // value = 0.d * 10^point
        StringBuilder sb = new StringBuilder(24);
        if (value < 0) {
            sb.append('-');
        }
        if (point <= -4 || point > 16) {
            sb.append(d.charAt(0));
            if (d.length() > 1) {
                sb.append('.').append(d, 1, d.length());
            }
            int exponent = point - 1;
            sb.append(exponent < 0 ? "e-" : "e+");
            if (Math.abs(exponent) < 10) {
                sb.append('0');
            }
            sb.append(Math.abs(exponent));
        } else if (point <= 0) {
            sb.append("0.");
            for (int i = point; i < 0; i++) {
                sb.append('0');
            }
            sb.append(d);
        } else if (point >= d.length()) {
            sb.append(d);
            for (int i = d.length(); i < point; i++) {
                sb.append('0');
            }
            sb.append(".0");
        } else {
            sb.append(d, 0, point).append('.').append(d, point, d.length());
        }
        return sb.toString();
    }

    private static String noTrailingBackslash(String s) {
        int end = s.length();
        while (end > 0 && s.charAt(end - 1) == '\\') {
            end--;
        }
        if (end == s.length()) {
            return s;
        }
        StringBuilder sb = new StringBuilder(s.length()).append(s, 0, end);
        for (int i = end; i < s.length(); i++) {
            sb.append(TRAILING_BACKSLASH);
        }
        return sb.toString();
    }

    /** Escapes the special characters with a backslash; the five Telegraf refuses become two characters. */
    private static String escape(String s, char[] special) {
        StringBuilder sb = null;
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            String rep = null;
            switch (c) {
                case '\t': rep = "\\t"; break;
                case '\n': rep = "\\n"; break;
                case '\r': rep = "\\r"; break;
                case '\f': rep = "\\f"; break;
                case 0x0b: rep = "\\v"; break;
                default:
                    for (char sp : special) {
                        if (c == sp) {
                            rep = "\\" + c;
                            break;
                        }
                    }
            }
            if (rep != null) {
                if (sb == null) {
                    sb = new StringBuilder(s.length() + 8).append(s, 0, i);
                }
                sb.append(rep);
            } else if (sb != null) {
                sb.append(c);
            }
        }
        return sb == null ? s : sb.toString();
    }
}
