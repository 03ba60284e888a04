package dev.sparkscope.annotator.core;

/**
 * How free text (descriptions, error messages, names) is fitted into a point:
 * every product writes such text, so the limits are the same everywhere.
 */
public final class Text {

    /** Descriptions (often whole SQL texts) are cut here; InfluxDB allows 64 KB per string. */
    public static final int MAX_DESCRIPTION = 2000;
    /** The one-line text shown on an annotation. */
    public static final int MAX_TEXT_PART = 300;

    private Text() {
    }

    /** Cuts to at most max chars without splitting a surrogate pair; null stays null. */
    public static String clip(String s, int max) {
        if (s == null || s.length() <= max) {
            return s;
        }
        int end = max - 1;
        if (Character.isHighSurrogate(s.charAt(end - 1))) {
            end--;
        }
        return s.substring(0, end) + "…";
    }

    /** Error texts are often stack traces: the annotation's text shows their first line only. */
    public static String firstLine(String s) {
        if (s == null) {
            return null;
        }
        String t = s.trim();
        int nl = t.indexOf('\n');
        return nl < 0 ? t : t.substring(0, nl);
    }

    /** Whitespace runs (line breaks included) become one space, cut for an annotation's text. */
    public static String oneLine(String s) {
        if (s == null || s.isEmpty()) {
            return "(no description)";
        }
        return clip(s.trim().replaceAll("\\s+", " "), MAX_TEXT_PART);
    }
}
