/**
 * The profiler: the driver's control endpoint and work queue, the executors'
 * async-profiler sessions, and profiles written as nested-set rows. Depends
 * on the core only.
 *
 * <p>Internal: no compatibility promise. Only the three entry points in
 * {@code dev.sparkscope.annotator} (the names users put in
 * spark.extraListeners and spark.plugins) are kept stable.
 */
package dev.sparkscope.annotator.profiler;
