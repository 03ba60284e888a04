package dev.sparkscope.annotator.profiler;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Stacks to the nested set Grafana's flame graph panel reads: one row per
 * frame, depth first, widest child first, each value the sum of its children
 * plus its self value. The same layout as sparkscope/store/nested_set.py
 * (the thread sampler's and py-spy's profiles); keep the two in step.
 */
final class NestedSet {

    static final int MAX_DEPTH = 256;

    static final class Row {
        final int level;
        final long value;
        final long self;
        final String label;

        Row(int level, long value, long self, String label) {
            this.level = level;
            this.value = value;
            this.self = self;
            this.label = label;
        }
    }

    private static final class Node {
        final String label;
        long value;
        long self;
        final Map<String, Node> children = new HashMap<>();

        Node(String label) {
            this.label = label;
        }
    }

    private NestedSet() {
    }

    /**
     * Frames narrower than minShare of the total fold into their parent's self
     * value (totals stay exact, the row count stays a few thousand). Values
     * are multiplied by scale (the sampling interval, so the panel shows time).
     */
    static List<Row> rows(Map<String, Long> stacks, String rootLabel, double minShare, long scale) {
        Node root = new Node(rootLabel);
        for (Map.Entry<String, Long> e : stacks.entrySet()) {
            long w = e.getValue();
            if (w <= 0) {
                continue;
            }
            root.value += w;
            Node node = root;
            int depth = 0;
            for (String frame : e.getKey().split(";")) {
                if (frame.isEmpty() || depth++ >= MAX_DEPTH) {
                    continue;
                }
                Node child = node.children.get(frame);
                if (child == null) {
                    child = new Node(frame);
                    node.children.put(frame, child);
                }
                child.value += w;
                node = child;
            }
            node.self += w;
        }
        List<Row> out = new ArrayList<>();
        if (root.value == 0) {
            return out;
        }
        walk(root, 0, root.value * minShare, scale, out);
        return out;
    }

    private static void walk(Node node, int level, double cutoff, long scale, List<Row> out) {
        List<Node> kept = new ArrayList<>();
        long keptValue = 0;
        for (Node c : node.children.values()) {
            if (c.value >= cutoff) {
                kept.add(c);
                keptValue += c.value;
            }
        }
        long folded = node.value - node.self - keptValue;
        out.add(new Row(level, node.value * scale, (node.self + folded) * scale, node.label));
        kept.sort((a, b) -> a.value != b.value ? Long.compare(b.value, a.value) : a.label.compareTo(b.label));
        for (Node c : kept) {
            walk(c, level + 1, cutoff, scale, out);
        }
    }

    /** The frame with the most self value over the whole tree. */
    static String widestLeaf(List<Row> rows) {
        // In first-seen order, so that of frames with equal self time the first wins, as in nested_set.py.
        Map<String, Long> totals = new LinkedHashMap<>();
        for (Row r : rows) {
            if (r.self > 0 && r.level > 0) {
                totals.merge(r.label, r.self, Long::sum);
            }
        }
        String best = "";
        long max = -1;
        for (Map.Entry<String, Long> e : totals.entrySet()) {
            if (e.getValue() > max) {
                max = e.getValue();
                best = e.getKey();
            }
        }
        return best;
    }
}
