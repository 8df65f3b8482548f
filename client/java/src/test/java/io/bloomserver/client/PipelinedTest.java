package io.bloomserver.client;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import io.grpc.Status;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** The coalescing pipelined mode: many threads' single-key calls against the real server. */
class PipelinedTest {
  private static final int THREADS = 200;
  private static TestServer server;

  @BeforeAll
  static void start() throws Exception {
    server = new TestServer("--max_item_bytes=100");
  }

  @AfterAll
  static void stop() throws Exception {
    server.close();
  }

  /** Runs task(i) for i in [0, n) on THREADS threads that start together. */
  private static void onManyThreads(int n, IntTask task) throws Exception {
    ExecutorService pool = Executors.newFixedThreadPool(THREADS);
    CountDownLatch go = new CountDownLatch(1);
    try {
      List<Future<?>> futures = new ArrayList<>();
      for (int t = 0; t < THREADS; t++) {
        int thread = t;
        futures.add(pool.submit(() -> {
          go.await();
          for (int i = thread; i < n; i += THREADS) {
            task.run(i);
          }
          return null;
        }));
      }
      go.countDown();
      for (Future<?> future : futures) {
        future.get(120, TimeUnit.SECONDS);
      }
    } finally {
      pool.shutdownNow();
    }
  }

  interface IntTask {
    void run(int i) throws Exception;
  }

  /** Waits until `condition` holds, failing the test after 30 s. */
  private static void waitFor(java.util.function.BooleanSupplier condition, String what) {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
    while (!condition.getAsBoolean()) {
      if (System.nanoTime() > deadline) {
        fail("waited 30 s for " + what);
      }
      TestServer.sleep(5);
    }
  }

  private static List<byte[]> items(String prefix, int n) {
    List<byte[]> out = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      out.add(Items.utf8(prefix + i));
    }
    return out;
  }

  @Test
  void singleKeyCallsFromManyThreadsAnswerAsUnaryCallsDo() throws Exception {
    try (BloomClient unary = BloomClient.connect(server.target());
         BloomClient pipelined =
             BloomClient.builder(server.target()).pipelined(true).streams(2).build()) {
      unary.reserve("coalesced", Spec.bloom(100_000, 0.01));
      List<byte[]> old = items("old-", 2000);
      unary.add("coalesced", old);
      List<byte[]> probes = new ArrayList<>(old.subList(0, 1000));
      probes.addAll(items("never-", 3000));
      boolean[] expected = unary.mightContain("coalesced", probes);
      boolean[] got = new boolean[probes.size()];
      onManyThreads(
          probes.size(), i -> got[i] = pipelined.mightContain("coalesced", probes.get(i)));
      assertArrayEquals(expected, got);

      // Adds: each answers "new" exactly when a unary check said absent just before.
      List<byte[]> fresh = items("fresh-", 4000);
      boolean[] presentBefore = unary.mightContain("coalesced", fresh);
      boolean[] added = new boolean[fresh.size()];
      onManyThreads(fresh.size(), i -> added[i] = pipelined.add("coalesced", fresh.get(i)));
      for (int i = 0; i < fresh.size(); i++) {
        assertEquals(!presentBefore[i], added[i], "item " + i);
      }
      for (boolean present : unary.mightContain("coalesced", fresh)) {
        assertTrue(present);
      }
      long calls = probes.size() + fresh.size();
      long messages = pipelined.pipelineMessagesSent();
      assertTrue(
          messages < calls / 2, messages + " messages for " + calls + " calls: not coalesced");
    }
  }

  @Test
  void perUserFiltersAndCountsGoThroughThePipeline() throws Exception {
    try (BloomClient unary = BloomClient.connect(server.target());
         BloomClient pipelined = BloomClient.builder(server.target()).pipelined(true).build()) {
      Spec perUser = Spec.bloom(1000, 0.001);
      onManyThreads(2000,
          i
          -> pipelined.addOrCreate("user:" + (i % 400), perUser, List.of(Items.utf8("item-" + i))));
      boolean[] got = new boolean[4000];
      onManyThreads(4000,
          i
          -> got[i] = pipelined.mightContainOrAbsent(
                 "user:" + (i % 500), List.of(Items.utf8("item-" + (i % 2000))))[0]);
      for (int i = 0; i < 4000; i++) {
        boolean expected = unary.mightContainOrAbsent(
            "user:" + (i % 500), List.of(Items.utf8("item-" + (i % 2000))))[0];
        assertEquals(expected, got[i], "call " + i);
      }
      unary.reserve("pipelined-cuckoo", Spec.cuckoo(10_000, 0.001));
      List<byte[]> copies = items("copy-", 50);
      unary.add("pipelined-cuckoo", copies);
      unary.add("pipelined-cuckoo", copies.subList(0, 25));
      int[] expected = unary.count("pipelined-cuckoo", copies);
      int[] counts = new int[copies.size()];
      onManyThreads(
          copies.size(), i -> counts[i] = pipelined.count("pipelined-cuckoo", copies.get(i)));
      assertArrayEquals(expected, counts);
      boolean[] removed = new boolean[copies.size()];
      onManyThreads(
          copies.size(), i -> removed[i] = pipelined.remove("pipelined-cuckoo", copies.get(i)));
      for (boolean r : removed) {
        assertTrue(r);
      }
      assertArrayEquals(minusOne(expected), unary.count("pipelined-cuckoo", copies));
    }
  }

  private static int[] minusOne(int[] counts) {
    int[] out = counts.clone();
    for (int i = 0; i < out.length; i++) {
      out[i]--;
    }
    return out;
  }

  /** One call's bad item fails that call alone: the others merged with it succeed. */
  @Test
  void aBadCallInAMergedOperationFailsAlone() throws Exception {
    try (BloomClient pipelined = BloomClient.builder(server.target()).pipelined(true).build()) {
      pipelined.reserve("mixed", Spec.bloom(10_000, 0.01));
      byte[] tooLong = new byte[200]; // the server takes items of up to 100 bytes
      AtomicInteger refused = new AtomicInteger();
      onManyThreads(2000, i -> {
        if (i % 100 == 7) {
          try {
            pipelined.add("mixed", tooLong);
            fail("an item over --max_item_bytes was added");
          } catch (BloomException e) {
            assertEquals(Status.Code.INVALID_ARGUMENT, e.code(), e.getMessage());
            refused.incrementAndGet();
          }
        } else {
          pipelined.add("mixed", Items.utf8("ok-" + i));
        }
      });
      assertEquals(20, refused.get());
      assertEquals(1980, pipelined.stats("mixed").getItemsAdded());
    }
  }

  /**
   * A server killed and restarted under 200 threads of calls: every call ends (answered, or
   * UNAVAILABLE / DEADLINE_EXCEEDED), none hangs, calls succeed again after the restart, and
   * no acknowledged add is lost.
   */
  @Test
  void aServerRestartLeavesNoCallHanging() throws Exception {
    try (TestServer restarted = new TestServer();
         BloomClient pipelined = BloomClient.builder(restarted.target())
                                     .pipelined(true)
                                     .timeout(Duration.ofSeconds(5))
                                     .build()) {
      Spec spec = Spec.bloom(1_000_000, 0.001);
      pipelined.reserve("restart", spec);
      AtomicBoolean stop = new AtomicBoolean();
      AtomicInteger failures = new AtomicInteger();
      AtomicInteger ids = new AtomicInteger();
      List<String> acknowledged = Collections.synchronizedList(new ArrayList<>());
      ConcurrentHashMap<Status.Code, Integer> codes = new ConcurrentHashMap<>();
      ExecutorService pool = Executors.newFixedThreadPool(THREADS);
      List<Future<?>> writers = new ArrayList<>();
      for (int t = 0; t < THREADS; t++) {
        writers.add(pool.submit(() -> {
          while (!stop.get()) {
            String item = "restart-" + ids.incrementAndGet();
            try {
              pipelined.addOrCreate("restart", spec, List.of(Items.utf8(item)));
              acknowledged.add(item);
            } catch (BloomException e) {
              failures.incrementAndGet();
              codes.merge(e.code(), 1, Integer::sum);
              Thread.sleep(5);
            }
          }
          return null;
        }));
      }
      waitFor(() -> acknowledged.size() >= 2000, "2,000 adds acknowledged before the kill");
      restarted.kill();
      waitFor(() -> failures.get() > 0, "a call failing while the server is down");
      restarted.restart();
      int before = acknowledged.size();
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
      while (acknowledged.size() < before + 1000 && System.nanoTime() < deadline) {
        TestServer.sleep(20);
      }
      stop.set(true);
      for (Future<?> writer : writers) {
        writer.get(30, TimeUnit.SECONDS); // a hung call would time this out
      }
      pool.shutdownNow();
      assertTrue(acknowledged.size() >= before + 1000,
          "calls did not succeed again after the restart: " + acknowledged.size() + " after "
              + before);
      assertTrue(failures.get() > 0, "the kill failed no call");
      for (Status.Code code : codes.keySet()) {
        assertTrue(code == Status.Code.UNAVAILABLE || code == Status.Code.DEADLINE_EXCEEDED,
            "a call failed " + code);
      }
      List<byte[]> all = new ArrayList<>();
      synchronized (acknowledged) {
        for (String item : acknowledged) {
          all.add(Items.utf8(item));
        }
      }
      boolean[] present = pipelined.mightContain("restart", all);
      for (int i = 0; i < present.length; i++) {
        assertTrue(present[i], "acknowledged add lost: " + new String(all.get(i)));
      }
    }
  }
}
