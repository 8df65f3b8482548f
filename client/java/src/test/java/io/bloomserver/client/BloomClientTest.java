package io.bloomserver.client;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.bloomserver.bloom.v1.FilterStats;
import io.grpc.EquivalentAddressGroup;
import io.grpc.NameResolver;
import io.grpc.NameResolverProvider;
import io.grpc.NameResolverRegistry;
import io.grpc.Status;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.net.InetSocketAddress;
import java.net.URI;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Every RPC of the blocking and asynchronous client, and its errors, against the real server. */
class BloomClientTest {
  private static TestServer server;
  private static BloomClient client;

  @BeforeAll
  static void start() throws IOException {
    server = new TestServer();
    client = BloomClient.connect(server.target());
  }

  @AfterAll
  static void stop() throws Exception {
    client.close();
    server.close();
  }

  private static BloomException failure(Runnable call) {
    return assertThrows(BloomException.class, call::run);
  }

  @Test
  void reserveAddCheckStatsAndDelete() {
    assertTrue(client.reserve("users", Spec.bloom(10_000, 0.01)));
    assertFalse(client.reserve("users", Spec.bloom(10_000, 0.01)), "the same spec again");
    assertArrayEquals(new boolean[] {true, true}, client.add("users", Items.of("alice", "bob")));
    assertArrayEquals(new boolean[] {false, true}, client.add("users", Items.of("alice", "carol")));
    assertArrayEquals(new boolean[] {true, true, false},
        client.mightContain("users", Items.of("alice", "carol", "dave")));
    assertTrue(client.mightContain("users", "bob"));
    FilterStats stats = client.stats("users");
    assertEquals("users", stats.getName());
    assertEquals(3, stats.getItemsAdded());
    assertEquals(10_000, stats.getSpec().getCapacity());
    client.delete("users");
    BloomException missing = failure(() -> client.stats("users"));
    assertEquals(Status.Code.NOT_FOUND, missing.code());
    assertTrue(missing.serverMessage().contains("users"), missing.getMessage());
  }

  @Test
  void badInputGetsTheServersCodeAndMessage() {
    BloomException badRate = failure(() -> client.reserve("bad", Spec.bloom(100, 1.5)));
    assertEquals(Status.Code.INVALID_ARGUMENT, badRate.code());
    assertTrue(badRate.serverMessage().contains("error_rate"), badRate.getMessage());
    assertEquals(Status.Code.NOT_FOUND,
        failure(() -> client.mightContain("no-such-filter", Items.of("x"))).code());
    assertEquals(
        Status.Code.INVALID_ARGUMENT, failure(() -> client.add("whatever", List.of())).code());
    client.reserve("spec-a", Spec.bloom(100, 0.01));
    assertEquals(Status.Code.ALREADY_EXISTS,
        failure(() -> client.reserve("spec-a", Spec.bloom(200, 0.01))).code());
    assertEquals(Status.Code.FAILED_PRECONDITION,
        failure(() -> client.remove("spec-a", Items.of("x"))).code(), "remove on a Bloom filter");
    // The asynchronous form fails its future with the same exception.
    CompletableFuture<boolean[]> async = client.mightContainAsync("no-such-filter", Items.of("x"));
    CompletionException wrapped = assertThrows(CompletionException.class, async::join);
    assertEquals(Status.Code.NOT_FOUND, ((BloomException) wrapped.getCause()).code());
  }

  @Test
  void longListsGoOutInBatchesInOrder() {
    try (BloomClient small = BloomClient.builder(server.target()).batchSize(3).build()) {
      List<byte[]> items = new ArrayList<>();
      for (int i = 0; i < 10; i++) {
        items.add(Items.utf8("batched-" + i));
      }
      small.reserve("batched", Spec.bloom(1000, 0.001));
      small.add("batched", items.subList(0, 5));
      boolean[] present = small.mightContain("batched", items);
      for (int i = 0; i < 10; i++) {
        assertEquals(i < 5, present[i], "item " + i);
      }
      boolean[] added = small.add("batched", items);
      for (int i = 0; i < 10; i++) {
        assertEquals(i >= 5, added[i], "item " + i);
      }
      assertEquals(10, small.stats("batched").getItemsAdded());
    }
  }

  @Test
  void createIfMissingAndAbsentIfMissing() {
    assertArrayEquals(new boolean[] {false, false},
        client.mightContainOrAbsent("user:42:seen", Items.of("a", "b")));
    assertEquals(Status.Code.NOT_FOUND, failure(() -> client.stats("user:42:seen")).code(),
        "a check creates nothing");
    Spec spec = Spec.bloom(1000, 0.01).idleTtl(Duration.ofHours(1));
    assertArrayEquals(
        new boolean[] {true}, client.addOrCreate("user:42:seen", spec, Items.of("a")));
    assertArrayEquals(new boolean[] {true, false},
        client.mightContainOrAbsent("user:42:seen", Items.of("a", "b")));
    assertTrue(client.stats("user:42:seen").hasExpiresAt());
  }

  @Test
  void cuckooFiltersRemoveAndCount() {
    client.reserve("carts", Spec.cuckoo(1000, 0.001));
    client.add("carts", Items.of("x", "x", "y"));
    assertArrayEquals(new int[] {2, 1, 0}, client.count("carts", Items.of("x", "y", "z")));
    assertArrayEquals(new boolean[] {true, false}, client.remove("carts", Items.of("y", "z")));
    assertEquals(2, client.count("carts", Items.utf8("x")));
    assertTrue(client.remove("carts", Items.utf8("x")));
    assertEquals(1, client.count("carts", Items.utf8("x")));
    assertFalse(client.mightContain("carts", "y"));
  }

  @Test
  void listReadsEveryPage() throws Exception {
    List<CompletableFuture<Boolean>> reserves = new ArrayList<>();
    for (int i = 0; i < 1005; i++) { // more than one page of 1,000
      reserves.add(client.reserveAsync(String.format("paged:%04d", i), Spec.bloom(100, 0.01)));
    }
    for (CompletableFuture<Boolean> reserve : reserves) {
      assertTrue(reserve.get());
    }
    Iterator<FilterStats> filters = client.list("paged:");
    int n = 0;
    while (filters.hasNext()) {
      assertEquals(String.format("paged:%04d", n), filters.next().getName());
      n++;
    }
    assertEquals(1005, n);
    assertEquals(1005, client.listAsync("paged:").get().size());
    assertFalse(client.list("paged:none").hasNext());
  }

  @Test
  void mergeOrsAFilterMadeAlike() {
    client.reserve("merge:a", Spec.bloom(1000, 0.01));
    assertTrue(client.reserveLike("merge:b", "merge:a"));
    client.add("merge:a", Items.of("from-a"));
    client.add("merge:b", Items.of("from-b"));
    FilterStats merged = client.merge("merge:a", "merge:b");
    assertEquals("merge:a", merged.getName());
    assertArrayEquals(
        new boolean[] {true, true}, client.mightContain("merge:a", Items.of("from-a", "from-b")));
    client.reserve("merge:other", Spec.bloom(1000, 0.01));
    BloomException unlike = failure(() -> client.merge("merge:a", "merge:other"));
    assertEquals(Status.Code.FAILED_PRECONDITION, unlike.code(), unlike.getMessage());
  }

  @Test
  void exportAndImportThroughStreams() throws Exception {
    client.reserve("dump:src", Spec.bloom(100_000, 0.001));
    List<byte[]> items = new ArrayList<>();
    for (int i = 0; i < 5000; i++) {
      items.add(Items.utf8("dumped-" + i));
    }
    client.add("dump:src", items);
    ByteArrayOutputStream dump = new ByteArrayOutputStream();
    client.exportTo("dump:src", dump);
    assertTrue(dump.size() > 1000, "a dump of " + dump.size() + " bytes");
    FilterStats imported =
        client.importFrom("dump:copy", new ByteArrayInputStream(dump.toByteArray()), false);
    assertEquals("dump:copy", imported.getName());
    boolean[] present = client.mightContain("dump:copy", items);
    for (boolean p : present) {
      assertTrue(p);
    }
    assertEquals(Status.Code.ALREADY_EXISTS,
        failure(()
                    -> client.importFrom(
                        "dump:copy", new ByteArrayInputStream(dump.toByteArray()), false))
            .code());
    // Merging into an existing filter made alike: what either held is present.
    client.add("dump:copy", Items.of("only-in-copy"));
    client.importFromAsync("dump:copy", new ByteArrayInputStream(dump.toByteArray()), true).get();
    assertTrue(client.mightContain("dump:copy", "only-in-copy"));
    // A dump that cannot be read commits nothing.
    InputStream broken = new InputStream() {
      int left = 100;

      @Override
      public int read() throws IOException {
        if (left-- > 0) {
          return dump.toByteArray()[100 - left - 1] & 0xff;
        }
        throw new IOException("disk gone");
      }
    };
    assertEquals(
        Status.Code.ABORTED, failure(() -> client.importFrom("dump:broken", broken, false)).code());
    assertEquals(Status.Code.NOT_FOUND, failure(() -> client.stats("dump:broken")).code());
    ByteArrayOutputStream async = new ByteArrayOutputStream();
    client.exportToAsync("dump:src", async).get();
    assertArrayEquals(dump.toByteArray(), async.toByteArray());
  }

  @Test
  void healthAndDeadlines() {
    assertTrue(client.serving());
    assertEquals(BloomClient.HealthStatus.SERVING, client.health("bloom.v1.BloomFilterService"));
    assertEquals(Status.Code.NOT_FOUND, failure(() -> client.health("no.such.Service")).code());
    client.reserve("deadline", Spec.bloom(100, 0.01));
    BloomException late = failure(
        () -> client.withTimeout(Duration.ofNanos(1)).mightContain("deadline", Items.of("x")));
    assertEquals(Status.Code.DEADLINE_EXCEEDED, late.code());
    assertFalse(client.withTimeout(Duration.ofSeconds(5)).mightContain("deadline", "x"));
  }

  @Test
  void writesRaiseTheSequenceReadsSend() {
    long before = client.lastSequence();
    client.addOrCreate("sequence", Spec.bloom(100, 0.01), Items.of("x"));
    assertTrue(client.lastSequence() > before);
    long afterAdd = client.lastSequence();
    client.delete("sequence");
    assertTrue(client.lastSequence() > afterAdd, "a delete is a write too");
    client.observeSequence(afterAdd); // lower: no change
    assertTrue(client.lastSequence() > afterAdd);
    long seen = client.lastSequence();
    client.observeSequence(seen + 1000); // another client's write
    assertEquals(seen + 1000, client.lastSequence());
  }

  @Test
  void tlsWithTokens(@TempDir Path pki) throws Exception {
    TestServer.makePki(pki);
    try (TestServer secure = new TestServer("--tls_cert_file=" + pki.resolve("server.crt"),
             "--tls_key_file=" + pki.resolve("server.key"),
             "--auth_token_file=" + TestServer.tokenFile(pki, "s3cret"))) {
      for (boolean pipelined : new boolean[] {false, true}) {
        String name = "secure-" + pipelined;
        try (BloomClient writer = BloomClient.builder(secure.target())
                                      .tls(pki + "/ca.crt")
                                      .token("s3cret")
                                      .pipelined(pipelined)
                                      .build();
             BloomClient reader = BloomClient.builder(secure.target())
                                      .tls(pki + "/ca.crt")
                                      .token("s3cret-r")
                                      .pipelined(pipelined)
                                      .build();
             BloomClient stranger = BloomClient.builder(secure.target())
                                        .tls(pki + "/ca.crt")
                                        .pipelined(pipelined)
                                        .build()) {
          assertArrayEquals(
              new boolean[] {true}, writer.addOrCreate(name, Spec.bloom(100, 0.01), Items.of("x")));
          assertTrue(reader.mightContain(name, "x"));
          assertEquals(
              Status.Code.PERMISSION_DENIED, failure(() -> reader.add(name, Items.of("y"))).code());
          assertEquals(Status.Code.UNAUTHENTICATED,
              failure(() -> stranger.mightContain(name, Items.of("x"))).code());
        }
      }
      try (BloomClient plaintext = BloomClient.connect(secure.target())) {
        assertEquals(Status.Code.UNAVAILABLE,
            failure(() -> plaintext.withTimeout(Duration.ofSeconds(3)).serving()).code());
      }
    }
  }

  @Test
  void mutualTls(@TempDir Path pki) throws Exception {
    TestServer.makePki(pki);
    try (TestServer secure = new TestServer("--tls_cert_file=" + pki.resolve("server.crt"),
             "--tls_key_file=" + pki.resolve("server.key"),
             "--tls_client_ca_file=" + pki.resolve("ca.crt"))) {
      try (BloomClient known =
               BloomClient.builder(secure.target())
                   .mutualTls(pki + "/ca.crt", pki + "/client.crt", pki + "/client.key")
                   .build()) {
        assertTrue(known.addOrCreate("mtls", Spec.bloom(100, 0.01), Items.of("x"))[0]);
      }
      try (BloomClient anonymous =
               BloomClient.builder(secure.target()).tls(pki + "/ca.crt").build()) {
        assertEquals(Status.Code.UNAVAILABLE,
            failure(() -> anonymous.withTimeout(Duration.ofSeconds(3)).serving()).code());
      }
    }
    assertEquals(Status.Code.INVALID_ARGUMENT,
        failure(() -> BloomClient.builder("127.0.0.1:1").tls("/no/such/ca.crt").build()).code());
  }

  /**
   * A target naming several servers spreads the calls over them, and one killed under the
   * client is skipped. The addresses come from a resolver registered here, as a headless
   * Service's dns:/// name would give them; the servers are independent, each with its filter.
   */
  @Test
  void severalServersShareTheCallsAndAKilledOneIsSkipped() throws Exception {
    try (TestServer first = new TestServer(); TestServer second = new TestServer()) {
      List<InetSocketAddress> pods = new ArrayList<>();
      for (TestServer pod : List.of(first, second)) {
        try (BloomClient direct = BloomClient.connect(pod.target())) {
          direct.addOrCreate("spread", Spec.bloom(100, 0.01), Items.of("x"));
        }
        pods.add(new InetSocketAddress("127.0.0.1", pod.port()));
      }
      NameResolverRegistry.getDefaultRegistry().register(new FixedResolver("bloomtest", pods));
      try (BloomClient spread =
               BloomClient.builder("bloomtest:///pods").timeout(Duration.ofSeconds(5)).build()) {
        for (int i = 0; i < 20; i++) {
          assertArrayEquals(new boolean[] {true, false},
              spread.mightContain("spread", Items.of("x", "y")), "call " + i);
        }
        for (TestServer pod : List.of(first, second)) {
          try (BloomClient direct = BloomClient.connect(pod.target())) {
            assertTrue(direct.stats("spread").getChecks() > 0, pod.target() + " served no check");
          }
        }
        first.kill();
        for (int i = 0; i < 20; i++) {
          assertTrue(spread.mightContain("spread", "x"), "call " + i + " after a pod was killed");
        }
      }
    }
  }

  /** Resolves SCHEME:///anything to fixed addresses. */
  private static final class FixedResolver extends NameResolverProvider {
    private final String scheme;
    private final List<InetSocketAddress> addresses;

    FixedResolver(String scheme, List<InetSocketAddress> addresses) {
      this.scheme = scheme;
      this.addresses = addresses;
    }

    @Override
    protected boolean isAvailable() {
      return true;
    }

    @Override
    protected int priority() {
      return 5;
    }

    @Override
    public String getDefaultScheme() {
      return scheme;
    }

    @Override
    public NameResolver newNameResolver(URI target, NameResolver.Args args) {
      if (!scheme.equals(target.getScheme())) {
        return null;
      }
      return new NameResolver() {
        @Override
        public String getServiceAuthority() {
          return "pods";
        }

        @Override
        public void start(Listener2 listener) {
          List<EquivalentAddressGroup> groups = new ArrayList<>();
          for (InetSocketAddress address : addresses) {
            groups.add(new EquivalentAddressGroup(address));
          }
          listener.onResult(ResolutionResult.newBuilder().setAddresses(groups).build());
        }

        @Override
        public void shutdown() {}
      };
    }
  }
}
