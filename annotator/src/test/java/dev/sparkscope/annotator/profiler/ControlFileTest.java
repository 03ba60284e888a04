package dev.sparkscope.annotator.profiler;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.nio.file.attribute.UserPrincipal;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The control file holds the profiler's bearer token: nobody else may read it or choose where it goes. */
class ControlFileTest {

    @TempDir
    Path tmp;

    @Test
    void aNewDirectoryAndFileAreOursAlone() throws IOException {
        File f = ProfilerDriverPlugin.writeControlFile(tmp.resolve("ctl").toFile(), "app-1", "http://h:1", "s3cret");
        assertEquals("rw-------", PosixFilePermissions.toString(Files.getPosixFilePermissions(f.toPath())));
        assertEquals("rwx------", PosixFilePermissions.toString(Files.getPosixFilePermissions(tmp.resolve("ctl"))));
        assertTrue(new String(Files.readAllBytes(f.toPath()), StandardCharsets.UTF_8).contains("\"token\":\"s3cret\""));
    }

    @Test
    void aSymbolicLinkPlantedAsTheDirectoryIsRefused() throws IOException {
        Path target = Files.createDirectory(tmp.resolve("elsewhere"));
        Path link = Files.createSymbolicLink(tmp.resolve("ctl"), target);
        assertThrows(IOException.class,
                () -> ProfilerDriverPlugin.writeControlFile(link.toFile(), "app-1", "http://h:1", "s3cret"));
        assertEquals(0, target.toFile().list().length);
    }

    @Test
    void aDirectoryOfAnotherUserIsRefused() throws IOException {
        assumeTrue("root".equals(System.getProperty("user.name")), "only root can give a directory away");
        Path dir = Files.createDirectory(tmp.resolve("ctl"));
        UserPrincipal nobody = dir.getFileSystem().getUserPrincipalLookupService().lookupPrincipalByName("nobody");
        Files.setOwner(dir, nobody);
        IOException refused = assertThrows(IOException.class,
                () -> ProfilerDriverPlugin.writeControlFile(dir.toFile(), "app-1", "http://h:1", "s3cret"));
        assertTrue(refused.getMessage().contains("belongs to nobody"), refused.getMessage());
    }

    @Test
    void aLinkPlantedAtTheTemporaryNameIsNotFollowed() throws IOException {
        Path dir = Files.createDirectory(tmp.resolve("ctl"));
        Path victim = Files.write(tmp.resolve("victim"), "keep".getBytes(StandardCharsets.UTF_8));
        Files.createSymbolicLink(dir.resolve("app-1.json.tmp"), victim);
        ProfilerDriverPlugin.writeControlFile(dir.toFile(), "app-1", "http://h:1", "s3cret");
        assertEquals("keep", new String(Files.readAllBytes(victim), StandardCharsets.UTF_8));
    }
}
