/**
 * The shared core every product of the jar writes through: points and their
 * escaping, the one writer per JVM (SharedWriter) and its HTTP sender, the
 * sink's settings and the registry of every known key, logging, and the small helpers (text,
 * stamps, status words, Scala interop). Depends on no product package.
 *
 * <p>Internal: no compatibility promise. Only the three entry points in
 * {@code dev.sparkscope.annotator} (the names users put in
 * spark.extraListeners and spark.plugins) are kept stable.
 */
package dev.sparkscope.annotator.core;
