package dev.sparkscope.annotator.events;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

import org.junit.jupiter.api.Test;

/** Reason texts as Spark's scheduler backends write them (Spark 3.5 and 4.x sources). */
class ExecutorLossTest {

    private static void assertLoss(String reason, String cause, Integer code) {
        ExecutorLoss loss = ExecutorLoss.of(reason);
        assertEquals(cause, loss.cause, reason);
        assertEquals(code, loss.exitCode, reason);
    }

    @Test
    void kubernetes_oom_killed_pods() {
        assertLoss("The executor with id 13 exited with exit code 137(SIGKILL, possible container OOM).\n\n\n\n"
                + "The API gave the following container statuses:\n\n\t container name: spark-kubernetes-executor\n"
                + "\t exit code: 137\n\t termination reason: OOMKilled\n", ExecutorLoss.CONTAINER_OOM, 137);
        assertLoss("The executor with id 2 exited with exit code 137(SIGKILL, possible container OOM).",
                ExecutorLoss.KILLED, 137);
        assertLoss("The executor with id 4 exited with exit code 52(JVM OOM).", ExecutorLoss.JVM_OOM, 52);
    }

    @Test
    void yarn_containers_over_their_memory_limit() {
        assertLoss("Container killed by YARN for exceeding physical memory limits. 2.1 GB of 2 GB physical memory "
                + "used. Consider boosting spark.executor.memoryOverhead.", ExecutorLoss.CONTAINER_OOM, null);
        assertLoss("Container marked as failed: container_1 on host: h. Exit status: -104. Diagnostics: "
                + "Container [pid=1,containerID=container_1] is running beyond physical memory limits.",
                ExecutorLoss.CONTAINER_OOM, -104);
    }

    @Test
    void standalone_and_local_cluster_exits() {
        assertLoss("Command exited with code 137", ExecutorLoss.KILLED, 137);
        assertLoss("Command exited with code 1", ExecutorLoss.EXITED, 1);
        assertLoss("Executor decommission: worker decommissioned", ExecutorLoss.DECOMMISSIONED, null);
        assertLoss("Executor heartbeat timed out after 120000 ms", ExecutorLoss.OTHER, null);
        assertLoss("Executor killed by driver.", ExecutorLoss.RELEASED, null);
    }

    @Test
    void no_reason_is_other_and_no_code() {
        assertNull(ExecutorLoss.of(null).exitCode);
        assertEquals(ExecutorLoss.OTHER, ExecutorLoss.of("").cause);
    }
}
