package dev.sparkscope.annotator.events;

import java.util.Locale;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Why an executor went away, from the reason text Spark's scheduler backend
 * gives the driver: Kubernetes ("exited with exit code 137(SIGKILL, possible
 * container OOM)" and the pod's "OOMKilled"), YARN ("Container killed by YARN
 * for exceeding physical memory limits", exit status -104), standalone and
 * local-cluster ("Command exited with code 137"), and Spark's own exit codes
 * (52: the JVM threw OutOfMemoryError).
 */
final class ExecutorLoss {

    /** The kernel or the cluster manager killed it for its container's memory. */
    static final String CONTAINER_OOM = "container_oom";
    /** SIGKILL without the manager saying why: most often the OOM killer when a limit is set. */
    static final String KILLED = "killed";
    /** The JVM's heap ran out (java.lang.OutOfMemoryError; Spark exits with 52). */
    static final String JVM_OOM = "jvm_oom";
    static final String DECOMMISSIONED = "decommissioned";
    /** Given back by the driver (dynamic allocation's idle timeout, a kill request): not a loss. */
    static final String RELEASED = "released";
    static final String EXITED = "exited";
    static final String OTHER = "other";

    private static final Pattern EXIT_CODE = Pattern.compile(
            "(?i)(?:exit(?:ed)? (?:with )?(?:exit )?(?:code|status):? ?|exit status: ?)(-?\\d{1,4})");
    private static final Pattern MEMORY_LIMIT = Pattern.compile(
            "(?i)(OOMKilled|(exceeding|running beyond) (physical|virtual) memory limits?)");

    final String cause;
    final Integer exitCode;

    private ExecutorLoss(String cause, Integer exitCode) {
        this.cause = cause;
        this.exitCode = exitCode;
    }

    static ExecutorLoss of(String reason) {
        String text = reason == null ? "" : reason;
        Integer code = null;
        Matcher m = EXIT_CODE.matcher(text);
        if (m.find()) {
            code = Integer.valueOf(m.group(1));
        }
        String cause;
        if (MEMORY_LIMIT.matcher(text).find() || (code != null && (code == -104 || code == -103))) {
            cause = CONTAINER_OOM;
        } else if (code != null && code == 137) {
            cause = KILLED;
        } else if ((code != null && code == 52) || text.contains("OutOfMemoryError")) {
            cause = JVM_OOM;
        } else if (text.toLowerCase(Locale.ROOT).contains("killed by driver")) {
            cause = RELEASED;
        } else if (text.toLowerCase(Locale.ROOT).contains("decommission")) {
            cause = DECOMMISSIONED;
        } else if (code != null) {
            cause = EXITED;
        } else {
            cause = OTHER;
        }
        return new ExecutorLoss(cause, code);
    }
}
