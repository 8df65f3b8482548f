package io.bloomserver.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.fail;

import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * The real bloom-server binary (system property {@code bloom.server}) on 127.0.0.1:0 with a
 * fresh temp data dir, for the tests. Thread-safety: not thread-safe; one test's.
 */
final class TestServer implements AutoCloseable {
  final Path dir;
  private final List<String> args;
  private Process process;
  private String target;

  TestServer(String... args) throws IOException {
    this("127.0.0.1:0", List.of(args));
  }

  /** On {@code listen} ("127.0.0.1:PORT"): a pod that must advertise its address. */
  TestServer(String listen, List<String> args) throws IOException {
    dir = Files.createTempDirectory("bloom-java-test");
    this.args = List.copyOf(args);
    start(listen);
  }

  /** A port free now on 127.0.0.1. */
  static int freePort() throws IOException {
    try (java.net.ServerSocket socket =
             new java.net.ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
      return socket.getLocalPort();
    }
  }

  /** Sends {@code signal} ("STOP", "CONT") to the process. */
  void signal(String signal) throws IOException, InterruptedException {
    Process kill =
        new ProcessBuilder("kill", "-" + signal, Long.toString(process.pid())).start();
    assertEquals(0, kill.waitFor(), "kill -" + signal);
  }

  /** "127.0.0.1:PORT". */
  String target() {
    return target;
  }

  int port() {
    return Integer.parseInt(target.substring(target.lastIndexOf(':') + 1));
  }

  /** kill -9. */
  void kill() throws InterruptedException {
    if (process != null && process.isAlive()) {
      process.destroyForcibly();
      process.waitFor(30, TimeUnit.SECONDS);
    }
  }

  /** Starts again on the same port and data dir (after kill). */
  void restart() throws IOException {
    start(target);
  }

  private void start(String listen) throws IOException {
    String binary = System.getProperty("bloom.server", "");
    if (binary.isEmpty() || !new File(binary).canExecute()) {
      fail("system property bloom.server must name the bloom-server binary (got '" + binary + "')");
    }
    Path portFile = dir.resolve("port");
    Files.deleteIfExists(portFile);
    List<String> command = new ArrayList<>(List.of(binary, "--listen=" + listen,
        "--data_dir=" + dir.resolve("data"), "--port_file=" + portFile));
    command.addAll(args);
    process = new ProcessBuilder(command)
                  .redirectErrorStream(true)
                  .redirectOutput(ProcessBuilder.Redirect.appendTo(dir.resolve("log").toFile()))
                  .start();
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
    while (System.nanoTime() < deadline) {
      if (Files.exists(portFile)) {
        String port = Files.readString(portFile).trim();
        if (!port.isEmpty()) {
          target = "127.0.0.1:" + port;
          return;
        }
      }
      if (!process.isAlive()) {
        fail("bloom-server exited: " + log());
      }
      sleep(10);
    }
    fail("bloom-server did not start: " + log());
  }

  String log() {
    try {
      return Files.readString(dir.resolve("log"));
    } catch (IOException e) {
      return "(no log: " + e + ")";
    }
  }

  @Override
  public void close() throws Exception {
    kill();
    deleteTree(dir.toFile());
  }

  static void sleep(long millis) {
    try {
      Thread.sleep(millis);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new AssertionError(e);
    }
  }

  private static void deleteTree(File file) {
    File[] children = file.listFiles();
    if (children != null) {
      for (File child : children) {
        deleteTree(child);
      }
    }
    file.delete();
  }

  /** A token file giving {@code token} role write and {@code token + "-r"} role read. */
  static Path tokenFile(Path dir, String token) throws IOException {
    Path path = dir.resolve("tokens");
    Files.writeString(path, line(token, "write") + line(token + "-r", "read"));
    return path;
  }

  private static String line(String token, String role) {
    try {
      byte[] sum =
          MessageDigest.getInstance("SHA-256").digest(token.getBytes(StandardCharsets.UTF_8));
      return hex(sum) + " " + role + " java-test-" + role + "\n";
    } catch (NoSuchAlgorithmException e) {
      throw new AssertionError(e);
    }
  }

  static String hex(byte[] bytes) {
    StringBuilder out = new StringBuilder();
    for (byte b : bytes) {
      out.append(String.format("%02x", b & 0xff));
    }
    return out.toString();
  }

  /**
   * A throwaway CA with a server certificate (127.0.0.1, localhost) and a client certificate,
   * made with openssl in {@code dir}: ca.crt, server.{crt,key}, client.{crt,key}.
   */
  static void makePki(Path dir) throws IOException, InterruptedException {
    run(dir,
        "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout ca.key"
            + " -out ca.crt -days 2 -subj /CN=java-test-ca");
    issue(
        dir, "server", "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n");
    issue(dir, "client", "extendedKeyUsage=clientAuth\n");
  }

  private static void issue(Path dir, String name, String extensions)
      throws IOException, InterruptedException {
    Files.writeString(dir.resolve(name + ".ext"), extensions);
    run(dir,
        "openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout " + name
            + ".key -out " + name + ".csr -subj /CN=" + name);
    run(dir,
        "openssl x509 -req -in " + name + ".csr -CA ca.crt -CAkey ca.key -CAcreateserial -out "
            + name + ".crt -days 2 -extfile " + name + ".ext");
  }

  private static void run(Path dir, String command) throws IOException, InterruptedException {
    Process p = new ProcessBuilder("sh", "-c", command)
                    .directory(dir.toFile())
                    .redirectErrorStream(true)
                    .start();
    String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    assertEquals(0, p.waitFor(), command + "\n" + out);
  }
}
