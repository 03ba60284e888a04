package dev.sparkscope.annotator.core;

/**
 * Point times for entities that share a series (every query of an
 * application is one series: ids are fields, not tags), so that two which
 * start in the same millisecond stay two points.
 */
public final class Stamps {

    private static final long NANOS_PER_MS = 1_000_000L;

    private Stamps() {
    }

    /**
     * The point's time: its start millisecond, plus id modulo 10^6 in
     * nanoseconds. Two entities of one kind collide only if their ids differ
     * by a multiple of a million and they start in the same millisecond.
     */
    public static long stamp(long timeMs, long entityOffset) {
        return timeMs * NANOS_PER_MS + Math.floorMod(entityOffset, NANOS_PER_MS);
    }
}
