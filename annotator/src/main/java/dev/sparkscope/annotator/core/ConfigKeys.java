package dev.sparkscope.annotator.core;

import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * Every {@code spark.sparkscope.*} key the jar reads, for typo detection:
 * each product declares its own keys, and the entry point that checks the
 * user's settings registers them all here. A key nobody declared is a typo
 * (or a key of another version) and is warned about with the closest known
 * key; a retired key gets its own note saying what replaced it.
 */
public final class ConfigKeys {

    public static final String PREFIX = "spark.sparkscope.";

    private final List<String> known = new ArrayList<>();
    private final Map<String, String> retired = new LinkedHashMap<>();

    /** declared: each product's keys; retired: a key no longer read to the note that says what replaced it. */
    public ConfigKeys(Collection<? extends Collection<String>> declared, Map<String, String> retired) {
        for (Collection<String> keys : declared) {
            known.addAll(keys);
        }
        this.retired.putAll(retired);
    }

    public List<String> known() {
        return Collections.unmodifiableList(known);
    }

    /**
     * One warning per {@code spark.sparkscope.*} key that this version does not
     * read (a misspelt key would otherwise be ignored without a word), naming
     * the closest known key.
     */
    public List<String> unknownKeys(Collection<String> setKeys) {
        List<String> warnings = new ArrayList<>();
        for (String key : setKeys) {
            if (key == null || !key.startsWith(PREFIX) || known.contains(key)) {
                continue;
            }
            if (retired.containsKey(key)) {
                warnings.add("sparkscope annotator: " + key + " " + retired.get(key));
                continue;
            }
            String closest = null;
            int best = Integer.MAX_VALUE;
            for (String candidate : known) {
                int d = editDistance(key.toLowerCase(Locale.ROOT), candidate.toLowerCase(Locale.ROOT));
                if (d < best) {
                    best = d;
                    closest = candidate;
                }
            }
            warnings.add("sparkscope annotator: unknown setting " + key + " is ignored"
                    + (best <= Math.max(3, key.length() / 4) ? "; did you mean " + closest + "?" : "")
                    + " (the annotator README lists every setting)");
        }
        return warnings;
    }

    private static int editDistance(String a, String b) {
        int[] prev = new int[b.length() + 1];
        int[] cur = new int[b.length() + 1];
        for (int j = 0; j <= b.length(); j++) {
            prev[j] = j;
        }
        for (int i = 1; i <= a.length(); i++) {
            cur[0] = i;
            for (int j = 1; j <= b.length(); j++) {
                int cost = a.charAt(i - 1) == b.charAt(j - 1) ? 0 : 1;
                cur[j] = Math.min(Math.min(cur[j - 1] + 1, prev[j] + 1), prev[j - 1] + cost);
            }
            int[] t = prev;
            prev = cur;
            cur = t;
        }
        return prev[b.length()];
    }
}
