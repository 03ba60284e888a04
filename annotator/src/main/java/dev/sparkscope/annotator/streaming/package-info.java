/**
 * Structured Streaming queries: each micro-batch's progress, each stateful
 * operator's state, and each query's start and end. Depends on the core
 * only.
 *
 * <p>Internal: no compatibility promise. Only the three entry points in
 * {@code dev.sparkscope.annotator} (the names users put in
 * spark.extraListeners and spark.plugins) are kept stable.
 */
package dev.sparkscope.annotator.streaming;
