package dev.sparkscope.annotator.events;

import dev.sparkscope.annotator.core.BoundedMap;

import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Who ran a job on a Spark Connect server (Spark 4): its user, session and
 * operation. Connect runs each operation's jobs with a job tag of its own,
 * {@code SparkConnect_OperationTag_User_<user>_Session_<session>_Operation_<operation>},
 * in the job's {@code spark.job.tags} property (beside other tags, comma-separated),
 * and announces the same tag with the three ids in its
 * SparkListenerConnectOperationStarted event. The ids from that event are taken
 * when it was seen ({@link Operations}); else they are read from the tag itself,
 * which is unambiguous while session and operation ids hold no underscore
 * (Connect requires both to be UUIDs), whatever the user id holds.
 */
public final class ConnectOwner {

    static final String TAG_PREFIX = "SparkConnect_OperationTag_";
    private static final Pattern TAG = Pattern.compile(
            "SparkConnect_OperationTag_User_(.*)_Session_([^_,]+)_Operation_([^_,]+)");

    public final String user;
    public final String session;
    public final String operation;

    ConnectOwner(String user, String session, String operation) {
        this.user = user;
        this.session = session;
        this.operation = operation;
    }

    /** The operation tag among a job's tags (spark.job.tags), or null: not a Connect job. */
    static String operationTag(String jobTags) {
        if (jobTags == null) {
            return null;
        }
        for (String tag : jobTags.split(",")) {
            String t = tag.trim();
            if (t.startsWith(TAG_PREFIX)) {
                return t;
            }
        }
        return null;
    }

    /** The owner as the tag spells it, or null when it is not an operation tag. */
    static ConnectOwner parse(String tag) {
        if (tag == null) {
            return null;
        }
        Matcher m = TAG.matcher(tag);
        return m.matches() ? new ConnectOwner(m.group(1), m.group(2), m.group(3)) : null;
    }

    /**
     * The operations started on this server by their job tag, from their
     * start events, forgotten when they close (bounded: a close can be lost).
     */
    public static final class Operations {
        static final int MAX_OPEN_OPERATIONS = 10_000;
        private final BoundedMap<String, ConnectOwner> open = new BoundedMap<>(MAX_OPEN_OPERATIONS);

        void started(String jobTag, String user, String session, String operation) {
            if (jobTag != null && session != null && operation != null) {
                open.put(jobTag, new ConnectOwner(user, session, operation));
            }
        }

        void closed(String jobTag) {
            if (jobTag != null) {
                open.remove(jobTag);
            }
        }

        /** The owner of a job with these spark.job.tags, or null for a job no Connect operation ran. */
        public ConnectOwner ofJob(String jobTags) {
            String tag = operationTag(jobTags);
            if (tag == null) {
                return null;
            }
            ConnectOwner seen = open.get(tag);
            return seen != null ? seen : parse(tag);
        }

        int held() {
            return open.size();
        }
    }
}
