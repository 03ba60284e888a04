package dev.sparkscope.annotator.core;

import java.net.MalformedURLException;
import java.net.URL;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.function.Function;

/**
 * Reads {@code spark.sparkscope.*} values and collects every problem, each
 * naming its key, instead of stopping at the first: a user fixes all bad
 * settings in one round. Each product reads its own keys with its own
 * reader, so a bad key turns off only the product that reads it.
 */
public final class SettingsReader {

    private final Function<String, String> lookup;
    private final List<String> problems = new ArrayList<>();
    String urlUser;
    String urlPassword;

    /** lookup: key to value, null when unset. */
    public SettingsReader(Function<String, String> lookup) {
        this.lookup = lookup;
    }

    public void problem(String text) {
        problems.add(text);
    }

    /** Throws with every problem found so far, joined; returns when there is none. */
    public void throwIfProblems() {
        if (!problems.isEmpty()) {
            throw new IllegalArgumentException(String.join("; ", problems));
        }
    }

    public String optional(String key) {
        String v = lookup.apply(key);
        if (v == null) {
            return null;
        }
        v = v.trim();
        return v.isEmpty() ? null : v;
    }

    public String nonEmpty(String key, String dflt) {
        String v = optional(key);
        return v == null ? dflt : v;
    }

    public boolean bool(String key, boolean dflt) {
        String v = optional(key);
        if (v == null) {
            return dflt;
        }
        switch (v.toLowerCase(Locale.ROOT)) {
            case "true": return true;
            case "false": return false;
            default:
                problems.add(key + "=" + v + " is not true or false");
                return dflt;
        }
    }

    public long number(String key, long dflt, long min, long max) {
        String v = optional(key);
        if (v == null) {
            return dflt;
        }
        try {
            long n = Long.parseLong(v);
            if (n < min || n > max) {
                problems.add(key + "=" + v + " is outside " + min + ".." + max);
                return dflt;
            }
            return n;
        } catch (NumberFormatException e) {
            problems.add(key + "=" + v + " is not a whole number");
            return dflt;
        }
    }

    public double decimal(String key, double dflt, double min) {
        String v = optional(key);
        if (v == null) {
            return dflt;
        }
        try {
            double d = Double.parseDouble(v);
            if (!(d >= min) || Double.isInfinite(d)) {
                problems.add(key + "=" + v + " must be a number >= " + min);
                return dflt;
            }
            return d;
        } catch (NumberFormatException e) {
            problems.add(key + "=" + v + " is not a number");
            return dflt;
        }
    }

    /** An http(s) base URL; user:password@ in it is kept apart (urlUser, urlPassword) and out of the result. */
    String url(String key, String dflt) {
        String v = nonEmpty(key, dflt);
        while (v.endsWith("/")) {
            v = v.substring(0, v.length() - 1);
        }
        // Never log a password someone put in the URL.
        String shown = InfluxWriter.redact(v);
        String scheme = v.contains("://") ? v.substring(0, v.indexOf("://")).toLowerCase(Locale.ROOT) : "";
        if (!scheme.equals("http") && !scheme.equals("https")) {
            problems.add(key + "=" + shown + " must start with http:// or https:// (e.g. " + dflt + ")");
            return dflt;
        }
        try {
            // java.net.URL, not URI: URI reads no host in "influx_db" (underscores are
            // common in Docker service names), URL and the HTTP client take it.
            URL url = new URL(v);
            if (url.getHost() == null || url.getHost().isEmpty()) {
                problems.add(key + "=" + shown + " has no host (e.g. " + dflt + ")");
                return dflt;
            }
            if (url.getQuery() != null || url.getRef() != null) {
                problems.add(key + "=" + shown + " must not have a query or fragment: give the base URL, e.g. "
                        + dflt);
                return dflt;
            }
            if (url.getUserInfo() != null) {
                // user:password@ in the URL: used as the credentials unless the keys set them,
                // and kept out of the URL (and so out of every log line).
                String info = url.getUserInfo();
                int colon = info.indexOf(':');
                urlUser = decode(colon < 0 ? info : info.substring(0, colon));
                urlPassword = colon < 0 ? null : decode(info.substring(colon + 1));
                v = v.replaceFirst("//[^/@]*@", "//");
            }
            return v;
        } catch (MalformedURLException e) {
            problems.add(key + "=" + shown + " is not a URL (e.g. " + dflt + ")");
            return dflt;
        }
    }

    private static String decode(String s) {
        try {
            return java.net.URLDecoder.decode(s, "UTF-8");
        } catch (java.io.UnsupportedEncodingException | IllegalArgumentException e) {
            return s;
        }
    }
}
