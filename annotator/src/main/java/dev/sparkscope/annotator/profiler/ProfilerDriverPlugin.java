package dev.sparkscope.annotator.profiler;

import dev.sparkscope.annotator.core.AnnotatorLog;
import dev.sparkscope.annotator.core.ApplicationIdTag;
import dev.sparkscope.annotator.core.Json;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import org.apache.spark.SparkContext;
import org.apache.spark.api.plugin.DriverPlugin;
import org.apache.spark.api.plugin.PluginContext;

import java.io.File;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.URI;
import java.net.URLDecoder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.nio.file.attribute.UserPrincipal;
import java.security.SecureRandom;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Executors;

/**
 * The driver's side of the profiler: relays profile requests from
 * {@code ./sparkscope profile} to executors. It listens on 127.0.0.1 (a
 * random port unless set) and leaves the URL and a random token in a file
 * only its user can read ({@code <control.dir>/<application id>.json}); a
 * request without the token is refused. Executors ask for work every few seconds
 * through Spark's own plugin RPC, so nothing listens on the executors.
 */
public final class ProfilerDriverPlugin implements DriverPlugin {

    static final String POLL = "poll";
    static final String RUN = "run";
    static final String STATUS = "status";

    private final ProfileRequests requests = new ProfileRequests();
    private HttpServer server;
    private File controlFile;
    private String token;
    private volatile String appId;
    private ProfilerSettings settings;
    private SparkContext sc;

    @Override
    public Map<String, String> init(SparkContext sc, PluginContext ctx) {
        try {
            this.sc = sc;
            settings = ProfilerSettings.parse(key -> sc.conf().get(key, null));
            if (settings.control) {
                startControl();
            }
        } catch (IllegalArgumentException e) {
            AnnotatorLog.warn("sparkscope profiler: on-demand profiles are off: " + e.getMessage());
        } catch (Throwable t) {
            AnnotatorLog.warn("sparkscope profiler: on-demand profiles are off: could not start: " + t);
            stopControl();
        }
        return Collections.emptyMap();
    }

    /**
     * Called once the application id is known (it is not yet at init): the
     * control file is named after it, so it is written now.
     */
    @Override
    public void registerMetrics(String sparkAppId, PluginContext ctx) {
        if (server == null) {
            return;
        }
        try {
            String resolved = ApplicationIdTag.resolve(key -> sc.conf().get(key, null));
            appId = resolved != null ? resolved : sparkAppId;
            String url = "http://" + hostForUrl(settings.controlHost) + ":" + server.getAddress().getPort();
            controlFile = writeControlFile(new File(settings.controlDir), appId, url, token);
            AnnotatorLog.info("sparkscope profiler: profiles of " + appId + " on demand at " + url
                    + " (./sparkscope profile finds it through " + controlFile + ")");
        } catch (Throwable t) {
            AnnotatorLog.warn("sparkscope profiler: on-demand profiles are off: could not write the control file "
                    + "in " + settings.controlDir + ": " + t);
            stopControl();
        }
    }

    private void startControl() throws IOException {
        byte[] secret = new byte[24];
        new SecureRandom().nextBytes(secret);
        StringBuilder hex = new StringBuilder();
        for (byte b : secret) {
            hex.append(String.format("%02x", b & 0xff));
        }
        token = hex.toString();
        // The JDK server reads each request in an executor thread with no time limit by
        // default: one local client sending half a request (no token needed for that) held
        // the only thread, and ./sparkscope profile timed out. A few threads, and requests
        // that take longer than this to arrive are closed (read once, when the class loads).
        if (System.getProperty("sun.net.httpserver.maxReqTime") == null) {
            System.setProperty("sun.net.httpserver.maxReqTime", "10");
        }
        server = HttpServer.create(new InetSocketAddress(settings.controlHost, settings.controlPort), 16);
        server.setExecutor(Executors.newFixedThreadPool(4, r -> {
            Thread t = new Thread(r, "sparkscope-profiler-control");
            t.setDaemon(true);
            return t;
        }));
        server.createContext("/", this::handle);
        server.start();
    }

    private static String hostForUrl(String host) {
        return host.contains(":") ? "[" + host + "]" : host;
    }

    /**
     * Writes the control file (URL and bearer token) into dir, refusing a dir
     * that another user could have planted: a symbolic link, or a directory
     * not owned by this JVM's user (under a shared /tmp anyone can create
     * it first). The file is created with mode 0600, never readable by others
     * even for an instant, and a link placed at its name is not followed.
     */
    static File writeControlFile(File dir, String appId, String url, String token) throws IOException {
        Path d = dir.toPath();
        boolean posix = d.getFileSystem().supportedFileAttributeViews().contains("posix");
        if (!Files.exists(d, LinkOption.NOFOLLOW_LINKS)) {
            if (posix) {
                Files.createDirectories(d, PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rwx------")));
            } else {
                Files.createDirectories(d);
            }
        }
        if (Files.isSymbolicLink(d) || !Files.isDirectory(d, LinkOption.NOFOLLOW_LINKS)) {
            throw new IOException(d + " is a symbolic link or not a directory: not writing the profiler's token there");
        }
        UserPrincipal owner = Files.getOwner(d, LinkOption.NOFOLLOW_LINKS);
        UserPrincipal me = d.getFileSystem().getUserPrincipalLookupService()
                .lookupPrincipalByName(System.getProperty("user.name"));
        if (!owner.equals(me)) {
            throw new IOException(d + " belongs to " + owner.getName() + ", not to " + me.getName()
                    + ": not writing the profiler's token there (set " + ProfilerSettings.CONTROL_DIR + ")");
        }
        if (posix) {
            Files.setPosixFilePermissions(d, PosixFilePermissions.fromString("rwx------"));
        }
        String safe = appId.replaceAll("[^A-Za-z0-9._-]", "_");
        Path file = d.resolve(safe + ".json");
        Path tmp = d.resolve(safe + ".json.tmp");
        String json = "{\"application\":" + Json.quote(appId) + ",\"url\":" + Json.quote(url) + ",\"token\":"
                + Json.quote(token) + ",\"pid\":" + pid() + "}\n";
        Files.deleteIfExists(tmp); // a leftover, or a link: removed, never followed
        if (posix) {
            Files.createFile(tmp, PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rw-------")));
        } else {
            Files.createFile(tmp);
        }
        try (OutputStream out = Files.newOutputStream(tmp, StandardOpenOption.WRITE, LinkOption.NOFOLLOW_LINKS)) {
            out.write(json.getBytes(StandardCharsets.UTF_8));
        }
        Files.move(tmp, file, java.nio.file.StandardCopyOption.REPLACE_EXISTING);
        return file.toFile();
    }

    private static String pid() {
        String name = java.lang.management.ManagementFactory.getRuntimeMXBean().getName();
        int at = name.indexOf('@');
        return at > 0 ? name.substring(0, at) : "0";
    }

    private void handle(HttpExchange ex) throws IOException {
        try {
            String auth = ex.getRequestHeaders().getFirst("Authorization");
            if (auth == null || !constantTimeEquals(auth, "Bearer " + token)) {
                reply(ex, 401, "{\"error\":\"missing or wrong token: use ./sparkscope profile, which reads it from "
                        + "the control file\"}");
                return;
            }
            Map<String, String> q = query(ex.getRequestURI());
            String path = ex.getRequestURI().getPath();
            long now = System.currentTimeMillis();
            if (path.equals("/executors")) {
                StringBuilder list = new StringBuilder();
                for (String e : requests.liveExecutors(now, settings.pollSeconds * 1000L)) {
                    list.append(list.length() == 0 ? "" : ",").append(Json.quote(e));
                }
                reply(ex, 200, "{\"application\":" + Json.quote(appId) + ",\"executors\":[" + list + "]}");
            } else if (path.equals("/profile") && ex.getRequestMethod().equals("POST")) {
                startProfile(ex, q, now);
            } else if (path.equals("/profile")) {
                ProfileRequests.Request r = requests.get(q.getOrDefault("id", ""));
                if (r == null) {
                    reply(ex, 404, "{\"error\":\"no such request\"}");
                } else {
                    reply(ex, 200, r.json());
                }
            } else {
                reply(ex, 404, "{\"error\":\"unknown path " + path.replace("\"", "") + "\"}");
            }
        } catch (Throwable t) {
            reply(ex, 500, "{\"error\":" + Json.quote(t.toString()) + "}");
        } finally {
            ex.close();
        }
    }

    private void startProfile(HttpExchange ex, Map<String, String> q, long now) throws IOException {
        String executor = q.getOrDefault("executor", "");
        String mode = q.getOrDefault("mode", "cpu");
        double seconds;
        try {
            seconds = Double.parseDouble(q.getOrDefault("seconds", "30"));
        } catch (NumberFormatException e) {
            seconds = -1;
        }
        List<String> live = requests.liveExecutors(now, settings.pollSeconds * 1000L);
        if (!ProfilerSettings.MODES.contains(mode)) {
            reply(ex, 400, "{\"error\":" + Json.quote("mode " + mode + " is not one of " + ProfilerSettings.MODES)
                    + "}");
        } else if (!(seconds > 0 && seconds <= 86_400)) {
            reply(ex, 400, "{\"error\":\"seconds must be a number between 0 and 86400\"}");
        } else if (!live.contains(executor)) {
            reply(ex, 404, "{\"error\":" + Json.quote("executor " + executor + " is not running the profiler "
                    + "plugin in " + appId + " (live: " + (live.isEmpty() ? "none yet" : String.join(", ", live))
                    + ")") + ",\"executors\":" + live.size() + "}");
        } else {
            ProfileRequests.Request r = requests.add(executor, mode, seconds, now);
            reply(ex, 202, r.json());
        }
    }

    private static boolean constantTimeEquals(String a, String b) {
        return java.security.MessageDigest.isEqual(a.getBytes(StandardCharsets.UTF_8),
                b.getBytes(StandardCharsets.UTF_8));
    }

    private static Map<String, String> query(URI uri) {
        Map<String, String> out = new HashMap<>();
        String raw = uri.getRawQuery();
        if (raw == null) {
            return out;
        }
        for (String pair : raw.split("&")) {
            int eq = pair.indexOf('=');
            try {
                String k = URLDecoder.decode(eq < 0 ? pair : pair.substring(0, eq), "UTF-8");
                String v = eq < 0 ? "" : URLDecoder.decode(pair.substring(eq + 1), "UTF-8");
                out.put(k, v);
            } catch (IllegalArgumentException | java.io.UnsupportedEncodingException ignored) {
                // a malformed pair is left out
            }
        }
        return out;
    }

    private static void reply(HttpExchange ex, int status, String body) throws IOException {
        byte[] bytes = body.getBytes(StandardCharsets.UTF_8);
        ex.getResponseHeaders().set("Content-Type", "application/json");
        ex.sendResponseHeaders(status, bytes.length);
        try (OutputStream out = ex.getResponseBody()) {
            out.write(bytes);
        }
    }

    /** Messages from executors: "poll <id>" asks for work; "status ..." reports on it. */
    @Override
    public Object receive(Object message) {
        try {
            String[] parts = String.valueOf(message).split("\t", -1);
            long now = System.currentTimeMillis();
            if (parts[0].equals(POLL) && parts.length >= 2) {
                ProfileRequests.Request r = requests.poll(parts[1], now);
                return r == null ? "" : RUN + "\t" + r.id + "\t" + r.mode + "\t" + r.seconds;
            }
            if (parts[0].equals(STATUS) && parts.length >= 6) {
                requests.update(parts[1], parts[2], parts[5], parts[3], parseLong(parts[4]));
            }
        } catch (Throwable t) {
            AnnotatorLog.warn("sparkscope profiler: ignoring a message from an executor: " + t);
        }
        return "";
    }

    private static long parseLong(String s) {
        try {
            return Long.parseLong(s);
        } catch (NumberFormatException e) {
            return 0;
        }
    }

    @Override
    public void shutdown() {
        stopControl();
    }

    private void stopControl() {
        if (server != null) {
            server.stop(0);
            server = null;
        }
        if (controlFile != null && !controlFile.delete()) {
            AnnotatorLog.warn("sparkscope profiler: could not remove " + controlFile);
        }
        controlFile = null;
    }
}
