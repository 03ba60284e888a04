package dev.sparkscope.annotator.core;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Reads one line the way InfluxDB 1.8 does (models/points.go: scanMeasurement,
 * scanTagsKey/Value, scanFields, unescapeTag, unescapeStringField), so tests
 * can check that what we write reads back as meant. Parse errors throw.
 */
public final class InfluxLineReader {

    public final String measurement;
    public final Map<String, String> tags = new LinkedHashMap<>();
    /** String fields unescaped; other fields as written (e.g. "12i", "1.5", "true"). */
    public final Map<String, String> fields = new LinkedHashMap<>();
    public final long time;

    private InfluxLineReader(String measurement, long time) {
        this.measurement = measurement;
        this.time = time;
    }

    /** One line; a raw newline is allowed only inside a quoted string field, as InfluxDB's scanLine does. */
    public static InfluxLineReader read(String line) {
        int i = 0;
        int n = line.length();
        // measurement: until an unescaped comma or space
        int start = 0;
        while (true) {
            i++;
            if (i >= n) {
                throw new IllegalArgumentException("missing fields");
            }
            if (line.charAt(i - 1) == '\\') {
                continue;
            }
            if (line.charAt(i) == ',' || line.charAt(i) == ' ') {
                break;
            }
        }
        String measurement = unescape(line.substring(start, i), ", ");
        List<String[]> tagPairs = new ArrayList<>();
        if (line.charAt(i) == ',') {
            i++;
            while (true) {
                int keyStart = i;
                if (i >= n || " ,=".indexOf(line.charAt(i)) >= 0) {
                    throw new IllegalArgumentException("missing tag key at " + i + ": " + line);
                }
                while (true) {
                    i++;
                    if (i >= n || ((line.charAt(i) == ' ' || line.charAt(i) == ',') && line.charAt(i - 1) != '\\')) {
                        throw new IllegalArgumentException("missing tag value: " + line);
                    }
                    if (line.charAt(i) == '=' && line.charAt(i - 1) != '\\') {
                        break;
                    }
                }
                String key = line.substring(keyStart, i);
                i++;
                int valueStart = i;
                if (i >= n || line.charAt(i) == ',' || line.charAt(i) == ' ') {
                    throw new IllegalArgumentException("missing tag value: " + line);
                }
                boolean more;
                while (true) {
                    i++;
                    if (i >= n) {
                        throw new IllegalArgumentException("missing fields: " + line);
                    }
                    char c = line.charAt(i);
                    boolean escaped = line.charAt(i - 1) == '\\';
                    if (c == '=' && !escaped) {
                        throw new IllegalArgumentException("invalid tag format: " + line);
                    }
                    if (c == ',' && !escaped) {
                        more = true;
                        break;
                    }
                    if (c == ' ' && !escaped) {
                        more = false;
                        break;
                    }
                }
                tagPairs.add(new String[] {key, line.substring(valueStart, i)});
                i++;
                if (!more) {
                    break;
                }
            }
        } else {
            i++;
        }
        // fields: backslash skips the next char; quotes count only in values
        int fieldsStart = i;
        if (line.substring(0, fieldsStart).indexOf('\n') >= 0) {
            throw new IllegalArgumentException("raw newline before the fields: " + line);
        }
        boolean quoted = false;
        int equals = 0;
        int commas = 0;
        List<Integer> splits = new ArrayList<>();
        while (i < n) {
            char c = line.charAt(i);
            if (c == '\\' && i + 1 < n) {
                i += 2;
                continue;
            }
            if (c == '"' && equals > commas) {
                quoted = !quoted;
                i++;
                continue;
            }
            if (c == '=' && !quoted) {
                equals++;
            }
            if (c == ',' && !quoted) {
                commas++;
                splits.add(i);
            }
            if (c == ' ' && !quoted) {
                break;
            }
            if (c == '\n' && !quoted) {
                throw new IllegalArgumentException("raw newline outside a string field: " + line);
            }
            i++;
        }
        if (quoted) {
            throw new IllegalArgumentException("unbalanced quotes: " + line);
        }
        if (equals == 0 || commas != equals - 1) {
            throw new IllegalArgumentException("invalid field format: " + line);
        }
        String fieldsText = line.substring(fieldsStart, i);
        String rest = line.substring(Math.min(n, i + 1));
        InfluxLineReader r = new InfluxLineReader(measurement, Long.parseLong(rest));
        for (String[] t : tagPairs) {
            r.tags.put(unescape(t[0], ", ="), unescape(t[1], ", ="));
        }
        int from = 0;
        for (int k = 0; k <= splits.size(); k++) {
            int to = k < splits.size() ? splits.get(k) - fieldsStart : fieldsText.length();
            String f = fieldsText.substring(from, to);
            from = to + 1;
            int eq = indexOfUnescaped(f, '=');
            String key = unescape(f.substring(0, eq), ", =\"");
            String value = f.substring(eq + 1);
            if (value.startsWith("\"")) {
                if (!value.endsWith("\"") || value.length() < 2) {
                    throw new IllegalArgumentException("bad string field: " + f);
                }
                value = unescapeStringField(value.substring(1, value.length() - 1));
            }
            r.fields.put(key, value);
        }
        return r;
    }

    /**
     * A request body's lines: split at each newline outside a quoted string
     * field, as InfluxDB's scanLine does (a string field may hold line breaks).
     */
    public static List<String> splitLines(String body) {
        List<String> out = new ArrayList<>();
        int start = 0;
        boolean inFields = false;
        boolean quoted = false;
        for (int i = 0; i <= body.length(); i++) {
            char c = i < body.length() ? body.charAt(i) : '\n';
            if (c == '\\' && i + 1 < body.length() && body.charAt(i + 1) != '\n') {
                i++;
            } else if (c == '\n' && !quoted) {
                if (i > start) {
                    out.add(body.substring(start, i));
                }
                start = i + 1;
                inFields = false;
            } else if (c == ' ' && !inFields) {
                inFields = true;
            } else if (c == '"' && inFields) {
                quoted = !quoted;
            }
        }
        return out;
    }

    /** The lines of one measurement, read, in the order they were written. */
    public static List<InfluxLineReader> points(List<String> lines, String measurement) {
        List<InfluxLineReader> out = new ArrayList<>();
        for (String line : lines) {
            InfluxLineReader p = read(line);
            if (p.measurement.equals(measurement)) {
                out.add(p);
            }
        }
        return out;
    }

    /**
     * Asserts fields by name, one assertEquals each, in the order given:
     * name, value, name, value, ... (values as {@link #fields} holds them; null: no such field).
     */
    public void assertFields(String... namesAndValues) {
        if (namesAndValues.length % 2 != 0) {
            throw new IllegalArgumentException("names and values come in pairs");
        }
        for (int i = 0; i < namesAndValues.length; i += 2) {
            assertEquals(namesAndValues[i + 1], fields.get(namesAndValues[i]), namesAndValues[i]);
        }
    }

    private static int indexOfUnescaped(String s, char c) {
        for (int i = 0; i < s.length(); i++) {
            if (s.charAt(i) == '\\') {
                i++;
            } else if (s.charAt(i) == c) {
                return i;
            }
        }
        throw new IllegalArgumentException("no '" + c + "' in " + s);
    }

    /** Like bytes.Replace of each "\X" with "X", one special char at a time (unescapeTag). */
    private static String unescape(String s, String specials) {
        for (char c : specials.toCharArray()) {
            s = s.replace("\\" + c, String.valueOf(c));
        }
        return s;
    }

    private static String unescapeStringField(String s) {
        StringBuilder out = new StringBuilder();
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (c == '\\' && i + 1 < s.length() && (s.charAt(i + 1) == '\\' || s.charAt(i + 1) == '"')) {
                out.append(s.charAt(i + 1));
                i++;
            } else {
                out.append(c);
            }
        }
        return out.toString();
    }
}
