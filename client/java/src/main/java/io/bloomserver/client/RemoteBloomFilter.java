package io.bloomserver.client;

import com.google.common.hash.Funnel;
import io.bloomserver.bloom.v1.FilterStats;

/**
 * A Bloom filter on the server, typed like Guava's {@code BloomFilter<T>} and Redisson's
 * {@code RBloomFilter<T>}, so that moving to a shared filter is a one-line change:
 *
 * <pre>{@code
 * // Guava: BloomFilter<String> seen = BloomFilter.create(Funnels.stringFunnel(UTF_8), 1_000_000,
 * 0.01); RemoteBloomFilter<String> seen = RemoteBloomFilter.create(client, "seen",
 * Funnels.stringFunnel(UTF_8), 1_000_000, 0.01); seen.put("alice"); seen.mightContain("alice"); //
 * true
 *
 * // Redisson: RBloomFilter<String> seen = redisson.getBloomFilter("seen"); seen.tryInit(...);
 * RemoteBloomFilter<String> seen = client.bloomFilter("seen", Funnels.stringFunnel(UTF_8));
 * seen.tryInit(1_000_000, 0.01);
 * seen.add("alice");
 * seen.contains("alice"); // true
 * }</pre>
 *
 * <p>An item is the bytes the funnel writes (numbers little-endian, as Guava's hashers read
 * them); a string through {@code Funnels.stringFunnel(UTF_8)} is its UTF-8 bytes, the same item
 * as that string in every other client language. What differs from Guava's in-process filter:
 * every call goes to the server (adds are durable and shared by every process), the filter
 * grows past its expected insertions instead of losing accuracy (unless made non-scaling), and
 * the server hashes with a key of its own.
 *
 * <p>Thread-safety: thread-safe, as its client.
 */
public final class RemoteBloomFilter<T> extends RemoteFilter<T> {
  RemoteBloomFilter(BloomClient client, String name, Funnel<? super T> funnel) {
    super(client, name, funnel);
  }

  /**
   * Guava's {@code BloomFilter.create}: the filter {@code name} for {@code expectedInsertions}
   * items at false-positive rate {@code fpp}, created if missing (an existing one with the same
   * spec is used; with another spec, ALREADY_EXISTS).
   */
  public static <T> RemoteBloomFilter<T> create(BloomClient client, String name,
      Funnel<? super T> funnel, long expectedInsertions, double fpp) {
    RemoteBloomFilter<T> filter = new RemoteBloomFilter<>(client, name, funnel);
    filter.reserve(Spec.bloom(expectedInsertions, fpp));
    return filter;
  }

  /** {@link #create(BloomClient, String, Funnel, long, double)} at Guava's default 3%. */
  public static <T> RemoteBloomFilter<T> create(
      BloomClient client, String name, Funnel<? super T> funnel, long expectedInsertions) {
    return create(client, name, funnel, expectedInsertions, 0.03);
  }

  /**
   * The filter with {@code spec} (windows, idle TTLs, non-scaling), created if missing.
   */
  public static <T> RemoteBloomFilter<T> create(
      BloomClient client, String name, Funnel<? super T> funnel, Spec spec) {
    RemoteBloomFilter<T> filter = new RemoteBloomFilter<>(client, name, funnel);
    filter.reserve(spec);
    return filter;
  }

  @Override
  Spec specFor(long expectedInsertions, double falseProbability) {
    return Spec.bloom(expectedInsertions, falseProbability);
  }

  /**
   * Guava's {@code putAll(BloomFilter)}: ORs filter {@code other} into this one on the server
   * (a Merge). {@code other} must have been made alike ({@link BloomClient#reserveLike}, or a
   * filter imported from this one's dump): FAILED_PRECONDITION otherwise.
   */
  public FilterStats putAll(RemoteBloomFilter<T> other) {
    return client.merge(name, other.name);
  }

  /**
   * An empty filter {@code name} made like this one (same spec and hash key), so that it can
   * later be merged into this one with {@link #putAll(RemoteBloomFilter)}.
   */
  public RemoteBloomFilter<T> createLike(String name) {
    client.reserveLike(name, this.name);
    return new RemoteBloomFilter<>(client, name, funnel);
  }

  /** The hash functions of the filter's first sub-filter, as Redisson's. */
  public int getHashIterations() {
    FilterStats stats = stats();
    return stats.getSubFilterStatsCount() == 0 ? 0 : stats.getSubFilterStats(0).getHashCount();
  }
}
