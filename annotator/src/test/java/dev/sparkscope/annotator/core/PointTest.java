package dev.sparkscope.annotator.core;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.util.Random;

import org.junit.jupiter.api.Test;

/** Line-protocol output: exact bytes for the tricky cases, and values that read back as written. */
class PointTest {

    @Test
    void tag_values_escape_commas_spaces_and_equals_signs() {
        String line = Point.measurement("m").tag("job_group", "etl, daily=1").field("f", 1L).timeNs(5).toLine();
        assertEquals("m,job_group=etl\\,\\ daily\\=1 f=1i 5", line);
    }

    @Test
    void string_fields_escape_quotes_and_backslashes_only() {
        String line = Point.measurement("m").field("d", "say \"hi\", a=b C:\\tmp\\").timeNs(1).toLine();
        assertEquals("m d=\"say \\\"hi\\\", a=b C:\\\\tmp\\\\\" 1", line);
    }

    @Test
    void line_breaks_in_string_fields_are_written_raw_and_read_back_exactly() {
        String line = Point.measurement("m").field("d", "SELECT 1\nFROM t\r\n").timeNs(1).toLine();
        assertEquals("m d=\"SELECT 1\nFROM t\r\n\" 1", line);
        assertEquals("SELECT 1\nFROM t\r\n", InfluxLineReader.read(line).fields.get("d"));
    }

    @Test
    void a_body_splits_at_line_breaks_outside_string_fields_only() {
        String a = Point.measurement("m").tag("t", "x\ny \"q").field("d", "one\ntwo \"three\"\n").timeNs(1).toLine();
        String b = Point.measurement("m").field("d", "\\").timeNs(2).toLine();
        assertEquals(java.util.Arrays.asList(a, b), InfluxLineReader.splitLines(a + "\n" + b + "\n"));
    }

    @Test
    void line_breaks_and_tabs_in_tag_values_are_written_as_two_characters() {
        String line = Point.measurement("m").tag("g", "a\nb\tc").field("f", true).timeNs(1).toLine();
        assertEquals("m,g=a\\nb\\tc f=true 1", line);
        assertFalse(line.contains("\n"));
    }

    @Test
    void empty_and_null_tags_are_omitted_but_empty_string_fields_are_kept() {
        String line = Point.measurement("m").tag("a", "").tag("b", null)
                .field("d", "").field("e", (String) null).field("n", (Long) null).timeNs(7).toLine();
        assertEquals("m d=\"\" 7", line);
    }

    @Test
    void a_trailing_backslash_in_a_tag_value_becomes_u29f5_because_it_would_escape_the_separator() {
        String line = Point.measurement("m").tag("path", "C:\\dir\\").tag("z", "x").tag("c", "\\")
                .field("f", 1L).timeNs(1).toLine();
        assertEquals("m,c=\u29f5,path=C:\\dir\u29f5,z=x f=1i 1", line);
    }

    @Test
    void empty_keys_are_refused() {
        assertThrows(IllegalArgumentException.class, () -> Point.measurement("m").tag("", "v"));
        assertThrows(IllegalArgumentException.class, () -> Point.measurement("m").field("", 1L));
        assertThrows(IllegalArgumentException.class, () -> Point.measurement("m").field("", (String) null));
    }

    @Test
    void unicode_passes_through_unchanged() {
        String line = Point.measurement("m").tag("t", "é✓😀").field("d", "日本語 😀").timeNs(1).toLine();
        assertEquals("m,t=é✓😀 d=\"日本語 😀\" 1", line);
    }

    @Test
    void tags_are_sorted_by_key_and_fields_keep_their_order() {
        String line = Point.measurement("m").tag("z", "1").tag("a", "2").field("y", 1L).field("b", 2L).timeNs(3).toLine();
        assertEquals("m,a=2,z=1 y=1i,b=2i 3", line);
    }

    @Test
    void number_fields_are_typed_and_non_finite_floats_are_omitted() {
        String line = Point.measurement("m").field("i", 42L).field("f", 1.25).field("nan", Double.NaN)
                .field("inf", Double.POSITIVE_INFINITY).field("b", false).timeNs(9).toLine();
        assertEquals("m i=42i,f=1.25,b=false 9", line);
    }

    @Test
    void measurement_escapes_commas_and_spaces_and_keys_escape_equals_too() {
        String line = Point.measurement("a b,c").tag("k=1", "v").field("f x", 1L).timeNs(1).toLine();
        assertEquals("a\\ b\\,c,k\\=1=v f\\ x=1i 1", line);
    }

    @Test
    void a_point_without_fields_is_refused() {
        assertThrows(IllegalStateException.class, () -> Point.measurement("m").tag("a", "b").toLine());
    }

    @Test
    void other_control_characters_are_kept_in_tags_and_every_one_in_string_fields() {
        String line = Point.measurement("m").tag("t", "a\fb\u0000c\u007fd").field("d", "x\fy\u001bz\tw")
                .timeNs(1).toLine();
        assertEquals("m,t=a\\fb\u0000c\u007fd d=\"x\fy\u001bz\tw\" 1", line);
    }

    @Test
    void floats_are_the_shortest_decimal_that_reads_back_in_pythons_repr_form() {
        Random random = new Random(7);
        for (int round = 0; round < 20000; round++) {
            double d = round % 2 == 0 ? Double.longBitsToDouble(random.nextLong())
                    : random.nextDouble() * Math.pow(10, random.nextInt(40) - 20);
            if (Double.isNaN(d) || Double.isInfinite(d)) {
                continue;
            }
            String text = Point.floatText(d);
            assertEquals(d, Double.parseDouble(text), text);
            // that it is the shortest is checked against Python's repr (tests/test_lineprotocol.py)
        }
        assertEquals("1e+16", Point.floatText(1e16));
        assertEquals("1000000000000000.0", Point.floatText(1e15));
        assertEquals("0.0001", Point.floatText(1e-4));
        assertEquals("1e-05", Point.floatText(1e-5));
        assertEquals("1e+23", Point.floatText(1e23));
        assertEquals("0.002", Point.floatText(0.002));
        assertEquals("-0.0", Point.floatText(-0.0));
        assertEquals("5e-324", Point.floatText(Double.MIN_VALUE));
    }

    @Test
    void nasty_values_read_back_exactly_as_influxdb_1_8_parses_them() {
        String alphabet = ",= \"\\\nab\té😀{}'\f\u0000\u001b\u007f";
        Random random = new Random(42);
        for (int round = 0; round < 5000; round++) {
            String tag = randomString(random, alphabet);
            String text = randomString(random, alphabet);
            String line = Point.measurement("sparkscope_job").tag("applicationid", "app-1").tag("job_group", tag)
                    .field("description", text).field("duration_ms", 12L).timeNs(1000L + round).toLine();
            InfluxLineReader read = InfluxLineReader.read(line);
            assertEquals("sparkscope_job", read.measurement, line);
            assertEquals(1000L + round, read.time, line);
            assertEquals("app-1", read.tags.get("applicationid"), line);
            assertEquals(tag.isEmpty() ? null : tagAsStored(tag), read.tags.get("job_group"), line);
            assertEquals(text, read.fields.get("description"), line);
            assertEquals("12i", read.fields.get("duration_ms"), line);
        }
    }

    /** What the rule says a tag value becomes, and nothing else. */
    private static String tagAsStored(String value) {
        String s = value.replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r").replace("\f", "\\f")
                .replace("\u000b", "\\v");
        int end = s.length();
        while (end > 0 && s.charAt(end - 1) == '\\') {
            end--;
        }
        StringBuilder sb = new StringBuilder(s.substring(0, end));
        for (int i = end; i < s.length(); i++) {
            sb.append('\u29f5');
        }
        return sb.toString();
    }

    private static String randomString(Random random, String alphabet) {
        int[] cps = alphabet.codePoints().toArray();
        StringBuilder sb = new StringBuilder();
        int len = random.nextInt(8);
        for (int i = 0; i < len; i++) {
            sb.appendCodePoint(cps[random.nextInt(cps.length)]);
        }
        return sb.toString();
    }
}
