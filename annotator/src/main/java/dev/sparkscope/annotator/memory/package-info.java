/**
 * Exact memory peaks (per executor, per stage, per stage and executor, as
 * Spark's REST API reports them), the memory settings of the run, and the
 * application's task time totals. Depends on the core only.
 *
 * <p>Internal: no compatibility promise. Only the three entry points in
 * {@code dev.sparkscope.annotator} (the names users put in
 * spark.extraListeners and spark.plugins) are kept stable.
 */
package dev.sparkscope.annotator.memory;
