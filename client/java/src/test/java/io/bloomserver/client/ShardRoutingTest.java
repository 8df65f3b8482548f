package io.bloomserver.client;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import io.bloomserver.bloom.v1.FilterStats;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Shard routing ({@link BloomClient.Builder#shardRouting}) against a real sharded deployment: a
 * real etcd (the etcd and etcdctl programs) and two bloom-server groups of one pod each, with
 * the map written by etcdctl. The slot function is checked against the values the server's
 * common/slot_test.cc and the Python client check.
 */
class ShardRoutingTest {
  private static final int SLOTS = 64;
  private static final String MAP_KEY = "java-shards/shardmap";
  private static final String[] GROUPS = {"java-shards/a", "java-shards/b"};

  private static Path etcdDir;
  private static Process etcd;
  private static String etcdEndpoint;
  private static final List<TestServer> pods = new ArrayList<>();

  @BeforeAll
  static void startDeployment() throws Exception {
    etcdDir = Files.createTempDirectory("bloom-java-etcd");
    int clientPort = TestServer.freePort();
    int peerPort = TestServer.freePort();
    etcdEndpoint = "127.0.0.1:" + clientPort;
    etcd = new ProcessBuilder("etcd", "--data-dir=" + etcdDir.resolve("data"),
        "--listen-client-urls=http://" + etcdEndpoint,
        "--advertise-client-urls=http://" + etcdEndpoint,
        "--listen-peer-urls=http://127.0.0.1:" + peerPort,
        "--initial-advertise-peer-urls=http://127.0.0.1:" + peerPort,
        "--initial-cluster=default=http://127.0.0.1:" + peerPort, "--log-level=error")
               .redirectErrorStream(true)
               .redirectOutput(etcdDir.resolve("log").toFile())
               .start();
    waitFor(() -> etcdctl("endpoint", "health") == 0, "etcd to start");
    putMap(1, GROUPS[0] + ":0-" + (SLOTS / 2 - 1) + "," + GROUPS[1] + ":" + (SLOTS / 2) + "-"
            + (SLOTS - 1));
    for (String group : GROUPS) {
      int port = TestServer.freePort();
      pods.add(new TestServer("127.0.0.1:" + port,
          List.of("--advertise_address=127.0.0.1:" + port, "--etcd_endpoints=" + etcdEndpoint,
              "--cluster=" + group, "--shard_map=" + MAP_KEY, "--leader_ttl=2s")));
    }
    for (TestServer pod : pods) {
      waitFor(() -> everyGroupHasAPrimary(pod.target()), pod.target() + " to know both primaries");
    }
  }

  @AfterAll
  static void stopDeployment() throws Exception {
    for (TestServer pod : pods) {
      pod.close();
    }
    if (etcd != null) {
      etcd.destroyForcibly();
      etcd.waitFor(10, TimeUnit.SECONDS);
    }
  }

  private static boolean everyGroupHasAPrimary(String target) {
    try (BloomClient client = BloomClient.connect(target)) {
      io.bloomserver.bloom.v1.GetShardMapResponse answer =
          io.bloomserver.bloom.v1.BloomFilterServiceGrpc.newBlockingStub(client.channel())
              .withDeadlineAfter(2, TimeUnit.SECONDS)
              .getShardMap(io.bloomserver.bloom.v1.GetShardMapRequest.getDefaultInstance());
      return answer.getMap().getGroupsCount() == 2
          && answer.getMap().getGroupsList().stream().allMatch(g -> !g.getPrimary().isEmpty());
    } catch (io.grpc.StatusRuntimeException e) {
      return false;
    }
  }

  private static void putMap(long version, String owners) throws Exception {
    String record = "format=1 version=" + version + " slots=" + SLOTS + " groups=" + GROUPS[0]
        + "," + GROUPS[1] + " owners=" + owners;
    assertEquals(0, etcdctl("put", MAP_KEY, record), "etcdctl put " + record);
  }

  private static int etcdctl(String... args) throws IOException, InterruptedException {
    List<String> command = new ArrayList<>(List.of("etcdctl", "--endpoints=" + etcdEndpoint));
    command.addAll(List.of(args));
    ProcessBuilder builder = new ProcessBuilder(command).redirectErrorStream(true);
    builder.environment().put("ETCDCTL_API", "3");
    Process process = builder.start();
    process.getInputStream().readAllBytes();
    return process.waitFor();
  }

  private interface Check {
    boolean holds() throws Exception;
  }

  private static void waitFor(Check check, String what) throws Exception {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
    while (!check.holds()) {
      if (System.nanoTime() > deadline) {
        fail("timed out waiting for " + what);
      }
      Thread.sleep(20);
    }
  }

  /** A name with prefix {@code prefix} whose slot group {@code group} owns under map 1. */
  private static String nameIn(int group, String prefix) {
    for (int n = 0;; n++) {
      String name = prefix + n;
      if (ShardRoutes.slotOf(name, SLOTS) / (SLOTS / 2) == group) {
        return name;
      }
    }
  }

  @Test
  void slotsAreTheServersOwn() {
    assertEquals(2342, ShardRoutes.slotOf("123456789", 4096));
    assertEquals(0x7BA5C282L % 4096, ShardRoutes.slotOf("user:1", 4096));
    assertEquals(0, ShardRoutes.slotOf("", 4096));
    assertEquals(0, ShardRoutes.slotOf("anything", 1));
    assertArrayEquals(
        "user42".getBytes(StandardCharsets.UTF_8), ShardRoutes.hashedPart("feed:{user42}:seen"));
    assertArrayEquals("x{}y".getBytes(StandardCharsets.UTF_8), ShardRoutes.hashedPart("x{}y"));
    assertArrayEquals("{b".getBytes(StandardCharsets.UTF_8), ShardRoutes.hashedPart("a{{b}c"));
    assertEquals(ShardRoutes.slotOf("user42", 4096),
        ShardRoutes.slotOf("feed:{user42}:seen", 4096));
    // Not ASCII: the slot hashes the name's UTF-8 bytes (zlib.crc32("é".encode()) % 4096 in
    // Python is 3390; its Latin-1 byte would give 1361), as every other client does.
    assertEquals(3390, ShardRoutes.slotOf("é", 4096));
  }

  @Test
  void anUnshardedServerTakesEveryCall() throws Exception {
    try (TestServer plain = new TestServer();
         BloomClient client = BloomClient.builder(plain.target()).shardRouting(true).build()) {
      assertEquals(0, client.shardMapVersion());
      client.reserve("plain", Spec.bloom(1000, 0.01));
      assertArrayEquals(new boolean[] {true}, client.add("plain", Items.of("x")));
      assertArrayEquals(new boolean[] {true, false}, client.mightContain("plain", Items.of("x", "y")));
    }
  }

  @Test
  void callsGoStraightToTheOwningGroupsPrimary() throws Exception {
    for (boolean pipelined : new boolean[] {false, true}) {
      try (BloomClient client = BloomClient.builder(pods.get(0).target())
                                    .shardRouting(true)
                                    .pipelined(pipelined)
                                    .timeout(Duration.ofSeconds(5))
                                    .build()) {
        assertTrue(client.shardMapVersion() >= 1);
        String inA = nameIn(0, "java-direct-" + pipelined + "-");
        String inB = nameIn(1, "java-direct-" + pipelined + "-");
        for (String name : List.of(inA, inB)) {
          client.reserve(name, Spec.bloom(1000, 0.01));
        }
        // With the seed (group a's pod) stopped, group b's filters are still reached: every
        // kind of call goes to b's primary, not through the seed.
        pods.get(0).signal("STOP");
        try {
          assertArrayEquals(new boolean[] {true, true}, client.add(inB, Items.of("x", "y")));
          assertArrayEquals(
              new boolean[] {true, false}, client.mightContain(inB, Items.of("x", "z")));
          assertEquals(2, client.stats(inB).getItemsAdded());
          // Transfers too (with a deadline: they have none of their own).
          BloomClient bounded = client.withTimeout(Duration.ofSeconds(10));
          java.io.ByteArrayOutputStream dump = new java.io.ByteArrayOutputStream();
          bounded.exportTo(inB, dump);
          FilterStats copy = bounded.importFrom(nameIn(1, "java-copy-" + pipelined + "-"),
              new java.io.ByteArrayInputStream(dump.toByteArray()), false);
          assertEquals(2, copy.getItemsAdded());
        } finally {
          pods.get(0).signal("CONT");
        }
        assertArrayEquals(new boolean[] {true}, client.add(inA, Items.of("x")));
        assertArrayEquals(new boolean[] {true}, client.mightContain(inA, Items.of("x")));
      }
    }
  }

  @Test
  void aClientFollowsTheMapWhenSlotsChangeOwner() throws Exception {
    try (BloomClient client =
             BloomClient.builder(pods.get(1).target()).shardRouting(true).build()) {
      long before = client.shardMapVersion();
      assertTrue(before >= 1);
      // Every slot to group b. The client's copy still sends group a's slots to a's pod,
      // which forwards them and names the new version; the client then fetches it.
      putMap(before + 1, GROUPS[1] + ":0-" + (SLOTS - 1));
      try {
        waitFor(() -> everyPodHolds(before + 1), "the pods to take map " + (before + 1));
        String moved = nameIn(0, "java-follow-");
        client.reserve(moved, Spec.bloom(1000, 0.01)); // through a's pod, to b
        assertArrayEquals(new boolean[] {true}, client.add(moved, Items.of("item")));
        waitFor(() -> client.shardMapVersion() == before + 1, "the client to fetch the map");
        // Now straight to b: a's pod may be stopped.
        pods.get(0).signal("STOP");
        try {
          assertArrayEquals(new boolean[] {true}, client.mightContain(moved, Items.of("item")));
        } finally {
          pods.get(0).signal("CONT");
        }
      } finally {
        putMap(before + 2,
            GROUPS[0] + ":0-" + (SLOTS / 2 - 1) + "," + GROUPS[1] + ":" + (SLOTS / 2) + "-"
                + (SLOTS - 1));
        waitFor(() -> everyPodHolds(before + 2), "the pods to take map " + (before + 2));
      }
    }
  }

  private static boolean everyPodHolds(long version) {
    for (TestServer pod : pods) {
      try (BloomClient client = BloomClient.connect(pod.target())) {
        long held = io.bloomserver.bloom.v1.BloomFilterServiceGrpc.newBlockingStub(
            client.channel())
                        .withDeadlineAfter(2, TimeUnit.SECONDS)
                        .getShardMap(
                            io.bloomserver.bloom.v1.GetShardMapRequest.getDefaultInstance())
                        .getMap()
                        .getVersion();
        if (held < version) {
          return false;
        }
      } catch (io.grpc.StatusRuntimeException e) {
        return false;
      }
    }
    return true;
  }
}
