package dev.sparkscope.annotator.core;

import scala.Option;

/**
 * Reads scala.Option values. Option's isDefined/get are the same in Scala
 * 2.12 and 2.13, so this is safe for Spark 3.5 and 4.x alike.
 */
public final class ScalaOption {

    private ScalaOption() {
    }

    /** The contained value, or null for None (or anything that is not an Option). */
    public static Object get(Object option) {
        if (option instanceof Option) {
            Option<?> o = (Option<?>) option;
            return o.isDefined() ? o.get() : null;
        }
        return null;
    }

    public static String string(Object option) {
        Object v = get(option);
        return v == null ? null : v.toString();
    }

    public static Long number(Object option) {
        Object v = get(option);
        return v instanceof Number ? ((Number) v).longValue() : null;
    }
}
