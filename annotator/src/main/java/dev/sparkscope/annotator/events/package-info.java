/**
 * Annotations: the application, its SQL queries, jobs, stages (with task
 * statistics and the straggler rule) and executors as points, and this
 * product's settings. Depends on the core only.
 *
 * <p>Internal: no compatibility promise. Only the three entry points in
 * {@code dev.sparkscope.annotator} (the names users put in
 * spark.extraListeners and spark.plugins) are kept stable.
 */
package dev.sparkscope.annotator.events;
