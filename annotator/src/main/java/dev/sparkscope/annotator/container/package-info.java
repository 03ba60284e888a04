/**
 * Container memory: each JVM reads its own memory cgroup (v1 or v2) and
 * samples it on a daemon thread. Depends on the core only.
 *
 * <p>Internal: no compatibility promise. Only the three entry points in
 * {@code dev.sparkscope.annotator} (the names users put in
 * spark.extraListeners and spark.plugins) are kept stable.
 */
package dev.sparkscope.annotator.container;
