package dev.sparkscope.annotator.core;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import org.junit.jupiter.api.Test;

/**
 * Point against the table of odd inputs that sparkscope.store.lineprotocol is held
 * to as well (tests/data/lineprotocol_cases.json, tests/test_lineprotocol.py):
 * the Java and Python encoders write every case to the same line.
 */
class LineProtocolCasesTest {

    static final String TABLE = "tests/data/lineprotocol_cases.json";

    /** The repository's file, found from Maven's basedir (annotator/) or wherever the test runs. */
    static Path repositoryFile(String relative) {
        String base = System.getProperty("basedir", System.getProperty("user.dir"));
        for (Path dir = Paths.get(base).toAbsolutePath(); dir != null; dir = dir.getParent()) {
            if (Files.isRegularFile(dir.resolve(relative))) {
                return dir.resolve(relative);
            }
        }
        throw new IllegalStateException(relative + " not found above " + base);
    }

    @SuppressWarnings("unchecked")
    static List<Map<String, Object>> cases(String json) {
        return (List<Map<String, Object>>) ((Map<String, Object>) JsonText.parse(json)).get("cases");
    }

    /** One case as Point writes it; throws when Point refuses it. */
    @SuppressWarnings("unchecked")
    static String lineOf(Map<String, Object> c) {
        Point p = Point.measurement((String) c.get("measurement"));
        for (Map.Entry<String, Object> t : ((Map<String, Object>) c.get("tags")).entrySet()) {
            p.tag(t.getKey(), (String) t.getValue());
        }
        for (Object f : (List<Object>) c.get("fields")) {
            List<Object> field = (List<Object>) f;
            String key = (String) field.get(0);
            Object value = field.get(2);
            switch ((String) field.get(1)) {
                case "string": p.field(key, (String) value); break;
                case "int": p.field(key, (Long) value); break;
                case "bool": p.field(key, (boolean) (Boolean) value); break;
                case "float":
                    p.field(key, value instanceof String ? Double.parseDouble(((String) value)
                            .replace("nan", "NaN").replace("inf", "Infinity")) : ((Number) value).doubleValue());
                    break;
                default: throw new IllegalArgumentException("no field type " + field.get(1));
            }
        }
        return p.timeNs((Long) c.get("time")).toLine();
    }

    /** The cases whose line Point does not write, or that Point writes though they are refused. */
    static List<String> disagreements(List<Map<String, Object>> cases) {
        List<String> wrong = new ArrayList<>();
        for (Map<String, Object> c : cases) {
            String line;
            try {
                line = lineOf(c);
            } catch (IllegalArgumentException | IllegalStateException refused) {
                line = null;
            }
            Object expected = c.containsKey("error") ? null : c.get("line");
            if (expected == null ? line != null : !expected.equals(line)) {
                wrong.add(c.get("case") + ": expected " + expected + ", wrote " + line);
            }
        }
        return wrong;
    }

    static String table() throws IOException {
        return new String(Files.readAllBytes(repositoryFile(TABLE)), StandardCharsets.UTF_8);
    }

    @Test
    void point_writes_every_shared_case_as_the_table_gives() throws IOException {
        List<Map<String, Object>> cases = cases(table());
        assertTrue(cases.size() >= 40, "cases: " + cases.size());
        assertEquals(new ArrayList<String>(), disagreements(cases));
    }

    @Test
    void a_changed_expectation_in_the_table_is_caught() throws IOException {
        // The old Java rule: trailing backslashes dropped from tag values.
        String changed = table().replace("\"line\": \"m,applicationid=app-1\\u29f5 f=1i 1\"",
                "\"line\": \"m,applicationid=app-1 f=1i 1\"");
        List<String> wrong = disagreements(cases(changed));
        assertEquals(1, wrong.size(), wrong.toString());
        assertTrue(wrong.get(0).startsWith("a trailing backslash in a tag value"), wrong.get(0));
    }

    @Test
    void a_refused_case_that_point_writes_is_caught() throws IOException {
        String changed = table().replace("\"measurement\": \"\",", "\"measurement\": \"m\",");
        assertThrows(AssertionError.class, () -> assertEquals(new ArrayList<String>(), disagreements(cases(changed))));
    }
}
