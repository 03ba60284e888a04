package dev.sparkscope.annotator.events;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;

import org.apache.spark.sql.connect.service.SparkListenerConnectOperationClosed;
import org.apache.spark.sql.connect.service.SparkListenerConnectOperationStarted;
import org.junit.jupiter.api.Test;

/** Connect's operation events, read by class name and reflection. */
class ConnectEventsTest {

    private static final String SESSION = "6f1c3c53-9d1e-4b4a-a2a4-6b0c8d0e6a11";
    private static final String OPERATION = "0b6c2a5e-1f3d-4c55-9a43-0a7e5d2f9c10";
    private static final String TAG = "SparkConnect_OperationTag_User_bob_Session_" + SESSION + "_Operation_" + OPERATION;

    @Test
    void an_operations_start_names_the_owner_of_the_jobs_with_its_tag() {
        ConnectOwner.Operations ops = new ConnectOwner.Operations();
        List<String> warnings = new ArrayList<>();
        ConnectEvents events = new ConnectEvents(ops, warnings::add);
        // The event's ids win over what the tag spells (here another user than the tag's).
        assertTrue(events.handle(new SparkListenerConnectOperationStarted(TAG, "bob@example.com", SESSION, OPERATION)));
        ConnectOwner owner = ops.ofJob("spark-session-x," + TAG);
        assertEquals("bob@example.com", owner.user);
        assertEquals(SESSION, owner.session);
        assertEquals(OPERATION, owner.operation);
        assertFalse(events.handle("not a Connect event"));
        assertTrue(warnings.isEmpty(), warnings.toString());
    }

    @Test
    void an_event_of_another_shape_turns_event_reading_off_with_one_warning_and_tags_still_name_owners() {
        ConnectOwner.Operations ops = new ConnectOwner.Operations();
        List<String> warnings = new ArrayList<>();
        ConnectEvents events = new ConnectEvents(ops, warnings::add);
        assertTrue(events.handle(new SparkListenerConnectOperationClosed()));
        assertTrue(events.handle(new SparkListenerConnectOperationClosed()));
        assertEquals(1, warnings.size(), warnings.toString());
        assertTrue(warnings.get(0).contains("job tags only"), warnings.get(0));
        assertEquals("bob", ops.ofJob(TAG).user);
    }
}
