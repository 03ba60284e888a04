package dev.sparkscope.annotator;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import org.apache.spark.scheduler.SparkListenerApplicationEnd;
import org.apache.spark.scheduler.SparkListenerInterface;
import org.junit.jupiter.api.Test;

/** Which queue the plugin puts the listener on, and that it never adds a second one. */
class ListenerPluginTest {

    private final Map<String, String> conf = new HashMap<>();
    private final List<SparkListenerInterface> status = new ArrayList<>();
    private final List<SparkListenerInterface> shared = new ArrayList<>();

    private AnnotatorListener attach() {
        conf.putIfAbsent("spark.sparkscope.influx.url", "http://127.0.0.1:9/");
        return ListenerPlugin.attach(conf::get, conf::keySet, status::add, shared::add);
    }

    @Test
    void the_listener_joins_the_status_queue() {
        AnnotatorListener listener = attach();
        assertTrue(listener.isActive());
        assertEquals(java.util.Collections.singletonList(listener), status);
        assertTrue(shared.isEmpty());
        listener.onEvent(new SparkListenerApplicationEnd(1)); // stops its writer
    }

    @Test
    void without_a_status_queue_it_goes_to_the_shared_one() {
        conf.put("spark.sparkscope.influx.url", "http://127.0.0.1:9/");
        AnnotatorListener listener = ListenerPlugin.attach(conf::get, conf::keySet, l -> {
            throw new NoSuchMethodError("LiveListenerBus.addToStatusQueue");
        }, shared::add);
        assertEquals(1, shared.size());
        assertSame(listener, shared.get(0));
        listener.onEvent(new SparkListenerApplicationEnd(1));
    }

    @Test
    void closed_once_whether_the_application_end_came_or_not() {
        AnnotatorListener ended = attach();
        ended.onEvent(new SparkListenerApplicationEnd(1));
        assertFalse(ended.close()); // the end closed it: the plugin's shutdown must not close the shared writer again
        AnnotatorListener neverStarted = attach();
        assertTrue(neverStarted.close()); // a SparkContext that failed after the plugin's init posts no end
        assertFalse(neverStarted.isActive());
        assertFalse(neverStarted.close());
    }

    @Test
    void attached_by_extra_listeners_already_it_adds_none() {
        conf.put("spark.extraListeners", "com.example.Audit, dev.sparkscope.annotator.AnnotatorListener");
        assertNull(attach());
        assertTrue(status.isEmpty());
        assertTrue(shared.isEmpty());
    }

    @Test
    void another_listener_of_a_similar_name_is_not_the_annotator() {
        assertFalse(ListenerPlugin.namesAnnotator("dev.sparkscope.annotator.AnnotatorListenerV2"));
        assertFalse(ListenerPlugin.namesAnnotator(null));
        assertTrue(ListenerPlugin.namesAnnotator(" dev.sparkscope.annotator.AnnotatorListener"));
    }
}
