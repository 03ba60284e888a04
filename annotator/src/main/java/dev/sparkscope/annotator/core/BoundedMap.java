package dev.sparkscope.annotator.core;

import java.util.LinkedHashMap;
import java.util.Map;

/**
 * Insertion-ordered map that forgets its oldest entry beyond a capacity, so
 * state kept per open job, query or stage stays bounded even when an end
 * event never comes (Spark drops events when its own queue overflows).
 */
public final class BoundedMap<K, V> extends LinkedHashMap<K, V> {

    private static final long serialVersionUID = 1L;

    private final int capacity;

    public BoundedMap(int capacity) {
        super(16, 0.75f, false);
        this.capacity = capacity;
    }

    @Override
    protected boolean removeEldestEntry(Map.Entry<K, V> eldest) {
        return size() > capacity;
    }
}
