package dev.sparkscope.annotator.core;

import java.lang.reflect.Method;
import java.util.ArrayList;
import java.util.List;

/**
 * Reads a Scala collection returned by a Spark accessor. Such accessors
 * return scala.collection.Seq in Scala 2.12 (Spark 3.5) and
 * scala.collection.immutable.Seq in 2.13 (Spark 4), so a direct call
 * compiled against one fails with NoSuchMethodError on the other. Both the
 * accessor and {@code iterator()} are looked up by name; scala.collection.Iterator
 * (hasNext, next) is the same in both.
 */
public final class ScalaSeq {

    private ScalaSeq() {
    }

    /** The elements of {@code owner.accessor()}, or an empty list if it cannot be read. */
    public static List<Object> elements(Object owner, String accessor) {
        List<Object> out = new ArrayList<>();
        if (owner == null) {
            return out;
        }
        try {
            Object seq = owner.getClass().getMethod(accessor).invoke(owner);
            if (seq == null) {
                return out;
            }
            Method iterator = seq.getClass().getMethod("iterator");
            iterator.setAccessible(true);
            scala.collection.Iterator<?> it = (scala.collection.Iterator<?>) iterator.invoke(seq);
            while (it.hasNext()) {
                out.add(it.next());
            }
        } catch (ReflectiveOperationException | RuntimeException | LinkageError ignored) {
            // an unknown shape: the caller falls back to what it has
        }
        return out;
    }
}
