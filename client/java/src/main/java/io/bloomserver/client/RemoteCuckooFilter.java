package io.bloomserver.client;

import com.google.common.hash.Funnel;
import java.util.Collection;
import java.util.List;

/**
 * A cuckoo filter on the server, typed as {@link RemoteBloomFilter} is, which can also remove
 * items and count the copies it holds of one: for sets that shrink (sessions that end, carts
 * that empty), where a Bloom filter would need rebuilding.
 *
 * <pre>{@code
 * RemoteCuckooFilter<Long> carts =
 *     RemoteCuckooFilter.create(client, "carts", Funnels.longFunnel(), 100_000, 0.001);
 * carts.put(42L);
 * carts.remove(42L);        // true: it held a copy
 * carts.mightContain(42L);  // false
 * }</pre>
 *
 * <p>Remove only what was added: removing another item can remove a colliding item's copy,
 * which then reads absent. A remove is not idempotent: a retried remove removes another copy.
 *
 * <p>Thread-safety: thread-safe, as its client.
 */
public final class RemoteCuckooFilter<T> extends RemoteFilter<T> {
  RemoteCuckooFilter(BloomClient client, String name, Funnel<? super T> funnel) {
    super(client, name, funnel);
  }

  /**
   * The cuckoo filter {@code name} for {@code capacity} items at false-positive rate {@code
   * fpp}, created if missing (an existing one with the same spec is used).
   */
  public static <T> RemoteCuckooFilter<T> create(
      BloomClient client, String name, Funnel<? super T> funnel, long capacity, double fpp) {
    RemoteCuckooFilter<T> filter = new RemoteCuckooFilter<>(client, name, funnel);
    filter.reserve(Spec.cuckoo(capacity, fpp));
    return filter;
  }

  @Override
  Spec specFor(long expectedInsertions, double falseProbability) {
    return Spec.cuckoo(expectedInsertions, falseProbability);
  }

  /** Removes one copy of {@code item}: true if the filter held one. */
  public boolean remove(T item) {
    return client.remove(name, List.of(itemOf(item)))[0];
  }

  /** Removes one copy of each of {@code items}: how many the filter held. */
  public long remove(Collection<? extends T> items) {
    return trues(client.remove(name, itemsOf(items)));
  }

  /** The copies of {@code item} the filter holds. */
  public int count(T item) {
    return client.count(name, List.of(itemOf(item)))[0];
  }
}
