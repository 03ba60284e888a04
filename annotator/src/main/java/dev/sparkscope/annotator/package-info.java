/**
 * The entry points users name in their Spark settings, and nothing else:
 * {@link dev.sparkscope.annotator.AnnotatorListener} (attached by {@link dev.sparkscope.annotator.ListenerPlugin} on Spark's status queue, or by spark.extraListeners),
 * {@link dev.sparkscope.annotator.ProfilerPlugin} and
 * {@link dev.sparkscope.annotator.ContainerMemoryPlugin} (spark.plugins).
 * Their fully qualified names are a compatibility promise; everything behind
 * them lives in one package per product (events, memory, streaming,
 * container, profiler) over a shared core, and is internal.
 */
package dev.sparkscope.annotator;
