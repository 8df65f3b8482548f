package io.bloomserver.client;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.common.hash.Funnel;
import com.google.common.hash.Funnels;
import io.grpc.Status;
import java.util.List;
import java.util.stream.Collectors;
import java.util.stream.IntStream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** RemoteBloomFilter and RemoteCuckooFilter under Guava's and Redisson's names. */
class TypedFilterTest {
  private static TestServer server;
  private static BloomClient client;

  @BeforeAll
  static void start() throws Exception {
    server = new TestServer();
    client = BloomClient.connect(server.target());
  }

  @AfterAll
  static void stop() throws Exception {
    client.close();
    server.close();
  }

  @Test
  void guavaShaped() {
    RemoteBloomFilter<String> seen =
        RemoteBloomFilter.create(client, "guava", Funnels.stringFunnel(UTF_8), 10_000, 0.01);
    assertTrue(seen.put("alice"));
    assertFalse(seen.put("alice"), "a second put of the same item is not new");
    assertTrue(seen.mightContain("alice"));
    assertFalse(seen.mightContain("bob"));
    assertTrue(seen.test("alice"));
    List<String> many = IntStream.range(0, 500).mapToObj(i -> "u" + i).collect(Collectors.toList());
    assertTrue(seen.putAll(many));
    assertFalse(seen.putAll(many), "all already present");
    long count = seen.approximateElementCount();
    assertTrue(count > 480 && count < 520, "approximately 501: " + count);
    assertTrue(seen.expectedFpp() > 0 && seen.expectedFpp() < 0.01, "fpp " + seen.expectedFpp());
    // The same create again uses the existing filter.
    RemoteBloomFilter<String> again =
        RemoteBloomFilter.create(client, "guava", Funnels.stringFunnel(UTF_8), 10_000, 0.01);
    assertTrue(again.mightContain("u42"));
    assertEquals(Status.Code.ALREADY_EXISTS,
        assertThrows(BloomException.class,
            () -> RemoteBloomFilter.create(client, "guava", Funnels.stringFunnel(UTF_8), 5, 0.5))
            .code());
  }

  @Test
  void putAllOfAFilterMergesIt() {
    RemoteBloomFilter<String> a =
        RemoteBloomFilter.create(client, "merge-a", Funnels.stringFunnel(UTF_8), 1000, 0.01);
    RemoteBloomFilter<String> b = a.createLike("merge-b");
    a.put("in-a");
    b.put("in-b");
    a.putAll(b);
    assertTrue(a.mightContain("in-b"));
    assertFalse(b.mightContain("in-a"));
    RemoteBloomFilter<String> unlike =
        RemoteBloomFilter.create(client, "merge-c", Funnels.stringFunnel(UTF_8), 1000, 0.01);
    assertEquals(Status.Code.FAILED_PRECONDITION,
        assertThrows(BloomException.class, () -> a.putAll(unlike)).code());
  }

  @Test
  void redissonShaped() {
    RemoteBloomFilter<String> filter = client.bloomFilter("redisson", Funnels.stringFunnel(UTF_8));
    assertFalse(filter.isExists());
    assertEquals(Status.Code.NOT_FOUND,
        assertThrows(BloomException.class, () -> filter.add("x")).code(), "not initialised");
    assertTrue(filter.tryInit(55_000, 0.03));
    assertFalse(filter.tryInit(55_000, 0.03), "already initialised");
    assertFalse(filter.tryInit(10, 0.5), "already initialised, with another spec");
    assertTrue(filter.isExists());
    assertTrue(filter.add("a"));
    assertEquals(2, filter.add(List.of("a", "b", "c")));
    assertTrue(filter.contains("b"));
    assertEquals(3, filter.contains(List.of("a", "b", "c", "d")));
    assertEquals(3, filter.count());
    assertEquals(55_000, filter.getExpectedInsertions());
    assertEquals(0.03, filter.getFalseProbability(), 1e-12);
    assertTrue(filter.getSize() > 55_000, "bits: " + filter.getSize());
    assertTrue(filter.getHashIterations() > 0);
    assertTrue(filter.delete());
    assertFalse(filter.delete());
    assertFalse(filter.isExists());
    // Initialised here, the handle recreates the filter on its next add if it went away.
    assertTrue(filter.tryInit(100, 0.01));
    client.delete("redisson");
    assertTrue(filter.add("back"));
    assertTrue(filter.contains("back"));
  }

  @Test
  void anItemIsTheBytesItsFunnelWrites() {
    RemoteBloomFilter<String> strings =
        RemoteBloomFilter.create(client, "bytes", Funnels.stringFunnel(UTF_8), 1000, 0.001);
    strings.put("héllo");
    assertTrue(client.mightContain("bytes", "héllo"), "a string is its UTF-8 bytes");
    assertArrayEquals("héllo".getBytes(UTF_8), strings.itemOf("héllo"));
    RemoteBloomFilter<Long> longs = client.bloomFilter("bytes", Funnels.longFunnel());
    assertArrayEquals(new byte[] {1, 0, 0, 0, 0, 0, 0, 0}, longs.itemOf(1L), "little-endian");
    Funnel<Order> orders = (order, sink) -> sink.putInt(order.shop).putString(order.id, UTF_8);
    RemoteBloomFilter<Order> typed = client.bloomFilter("bytes", orders);
    typed.put(new Order(7, "A-1"));
    assertTrue(typed.mightContain(new Order(7, "A-1")));
    assertFalse(typed.mightContain(new Order(8, "A-1")));
    assertTrue(client.mightContain("bytes", List.of(new byte[] {7, 0, 0, 0, 'A', '-', '1'}))[0]);
  }

  private static final class Order {
    final int shop;
    final String id;

    Order(int shop, String id) {
      this.shop = shop;
      this.id = id;
    }
  }

  @Test
  void cuckooRemovesAndCounts() {
    RemoteCuckooFilter<Long> carts =
        RemoteCuckooFilter.create(client, "carts", Funnels.longFunnel(), 10_000, 0.001);
    assertTrue(carts.put(42L));
    carts.add(42L);
    assertEquals(2, carts.count(42L));
    assertTrue(carts.remove(42L));
    assertEquals(1, carts.count(42L));
    assertTrue(carts.remove(42L));
    assertFalse(carts.mightContain(42L));
    assertFalse(carts.remove(42L));
    carts.add(List.of(1L, 2L, 3L));
    assertEquals(2, carts.remove(List.of(1L, 3L, 9L)));
    assertTrue(carts.contains(2L));
    client.reserve("a-bloom-filter", Spec.bloom(100, 0.01));
    RemoteCuckooFilter<Long> wrong = client.cuckooFilter("a-bloom-filter", Funnels.longFunnel());
    assertEquals(Status.Code.FAILED_PRECONDITION,
        assertThrows(BloomException.class, () -> wrong.remove(1L)).code());
  }
}
