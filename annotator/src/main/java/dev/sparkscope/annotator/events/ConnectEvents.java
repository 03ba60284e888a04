package dev.sparkscope.annotator.events;

import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.util.function.Consumer;

/**
 * Reads a Spark Connect server's operation events by reflection, matched by
 * class name: they live in the spark-connect jar, which Spark 3.5 and an
 * application that is not a Connect server do not have, so nothing here links
 * to them. The accessors used (jobTag, userId, sessionId, operationId) are
 * those of Spark 4's SparkListenerConnectOperationStarted and of its
 * Closed event (jobTag).
 */
public final class ConnectEvents {

    static final String PACKAGE = "org.apache.spark.sql.connect.service.";
    static final String STARTED_CLASS = PACKAGE + "SparkListenerConnectOperationStarted";
    static final String CLOSED_CLASS = PACKAGE + "SparkListenerConnectOperationClosed";

    private final ConnectOwner.Operations operations;
    private final Consumer<String> warn;
    private boolean broken;
    private Class<?> startedType;
    private Method startedTag;
    private Method startedUser;
    private Method startedSession;
    private Method startedOperation;
    private Class<?> closedType;
    private Method closedTag;

    public ConnectEvents(ConnectOwner.Operations operations, Consumer<String> warn) {
        this.operations = operations;
        this.warn = warn;
    }

    /** Returns whether the event was one of Connect's operation events read here. */
    public boolean handle(Object event) {
        Class<?> type = event.getClass();
        String name = type.getName();
        boolean isStarted = name.equals(STARTED_CLASS);
        boolean isClosed = !isStarted && name.equals(CLOSED_CLASS);
        if (!isStarted && !isClosed) {
            return false;
        }
        if (broken) {
            return true;
        }
        try {
            if (isStarted) {
                if (type != startedType) {
                    startedTag = type.getMethod("jobTag");
                    startedUser = type.getMethod("userId");
                    startedSession = type.getMethod("sessionId");
                    startedOperation = type.getMethod("operationId");
                    startedType = type;
                }
                operations.started((String) startedTag.invoke(event), (String) startedUser.invoke(event),
                        (String) startedSession.invoke(event), (String) startedOperation.invoke(event));
            } else {
                if (type != closedType) {
                    closedTag = type.getMethod("jobTag");
                    closedType = type;
                }
                operations.closed((String) closedTag.invoke(event));
            }
        } catch (NoSuchMethodException | IllegalAccessException | ClassCastException | LinkageError e) {
            broken = true;
            warn.accept("sparkscope annotator: Spark Connect operations are read from their job tags only: this "
                    + "Spark version's " + name + " does not look as expected (" + e + ")");
        } catch (InvocationTargetException e) {
            if (e.getCause() instanceof VirtualMachineError) {
                throw (VirtualMachineError) e.getCause();
            }
            throw new IllegalStateException("reading " + type.getSimpleName() + " failed", e.getCause());
        }
        return true;
    }
}
