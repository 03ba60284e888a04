package dev.sparkscope.annotator.core;

import java.util.function.Function;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The value of the {@code applicationid} tag: the same id Spark's metrics
 * system puts in every Graphite name, so that annotations and metrics of one
 * run share it. Spark (MetricsSystem.buildRegistryName) uses
 * {@code spark.metrics.namespace} when set, after substituting
 * {@code ${key}}, {@code ${env:NAME}} and {@code ${system:name}} references
 * (unresolvable ones stay as written), else {@code spark.app.id}.
 */
public final class ApplicationIdTag {

    static final String NAMESPACE_KEY = "spark.metrics.namespace";
    static final String APP_ID_KEY = "spark.app.id";

    private static final Pattern REFERENCE = Pattern.compile("\\$\\{([^}]+)}");
    private static final int MAX_DEPTH = 10;

    private ApplicationIdTag() {
    }

    /** The id, or null when neither key is set yet. */
    public static String resolve(Function<String, String> conf) {
        String namespace = conf.apply(NAMESPACE_KEY);
        if (namespace != null) {
            return substitute(namespace, conf, 0);
        }
        return conf.apply(APP_ID_KEY);
    }

    static String substitute(String value, Function<String, String> conf, int depth) {
        if (value == null || depth > MAX_DEPTH || value.indexOf("${") < 0) {
            return value;
        }
        Matcher m = REFERENCE.matcher(value);
        StringBuffer out = new StringBuffer();
        while (m.find()) {
            String ref = m.group(1);
            String replacement;
            if (ref.startsWith("env:")) {
                replacement = System.getenv(ref.substring(4));
            } else if (ref.startsWith("system:")) {
                replacement = System.getProperty(ref.substring(7));
            } else {
                replacement = substitute(conf.apply(ref), conf, depth + 1);
            }
            m.appendReplacement(out, Matcher.quoteReplacement(replacement == null ? m.group() : replacement));
        }
        m.appendTail(out);
        return out.toString();
    }
}
