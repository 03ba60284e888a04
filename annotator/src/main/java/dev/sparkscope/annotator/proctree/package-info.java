/**
 * Process-tree memory: each JVM reads the resident memory of itself and its
 * descendants (PySpark's workers, other children) from /proc without forking,
 * and writes Spark's ProcessTree*RSSMemory measurements, so that Spark's own
 * process-tree metrics (a pgrep per process per poll) can stay off. Depends on
 * the core only; its peaks reach the memory peaks through the core's
 * ProcessTreePeaks.
 *
 * <p>Internal: no compatibility promise. Only the three entry points in
 * {@code dev.sparkscope.annotator} (the names users put in
 * spark.extraListeners and spark.plugins) are kept stable.
 */
package dev.sparkscope.annotator.proctree;
