package io.bloomserver.client;

import com.google.common.hash.Funnel;
import io.bloomserver.bloom.v1.FilterStats;
import io.grpc.Status;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;
import java.util.function.Predicate;

/**
 * What {@link RemoteBloomFilter} and {@link RemoteCuckooFilter} share: a filter on the server
 * named {@code name}, whose items are the bytes a Guava {@link Funnel} writes, under both
 * Guava's names ({@code put}, {@code mightContain}) and Redisson's ({@code tryInit}, {@code
 * add}, {@code contains}).
 *
 * <p>A handle made by {@code create} or initialised by {@code tryInit} knows its spec and
 * creates the filter again on its next add if it went away (an idle TTL, a delete elsewhere).
 *
 * <p>Thread-safety: thread-safe, as its client.
 */
abstract class RemoteFilter<T> implements Predicate<T> {
  final BloomClient client;
  final String name;
  final Funnel<? super T> funnel;
  private volatile Spec spec; // known once created or initialised here; null: not known

  RemoteFilter(BloomClient client, String name, Funnel<? super T> funnel) {
    this.client = Objects.requireNonNull(client, "client");
    this.name = Objects.requireNonNull(name, "name");
    this.funnel = Objects.requireNonNull(funnel, "funnel");
  }

  abstract Spec specFor(long expectedInsertions, double falseProbability);

  /** Reserves the filter with {@code spec}; ALREADY_EXISTS if it exists with another. */
  void reserve(Spec spec) {
    client.reserve(name, spec);
    this.spec = spec;
  }

  /** The filter's name on the server. */
  public String getName() {
    return name;
  }

  /** The item {@code item} is: the bytes the funnel writes for it. */
  public byte[] itemOf(T item) {
    return ItemSink.bytesOf(funnel, item);
  }

  List<byte[]> itemsOf(Collection<? extends T> items) {
    List<byte[]> out = new ArrayList<>(items.size());
    for (T item : items) {
      out.add(itemOf(item));
    }
    return out;
  }

  // ---- Redisson's names ---------------------------------------------------------------------

  /**
   * Creates the filter for {@code expectedInsertions} items at false-positive rate {@code
   * falseProbability}: true if this call created it, false if it existed already (with any
   * spec), as Redisson's {@code tryInit}.
   */
  public boolean tryInit(long expectedInsertions, double falseProbability) {
    Spec wanted = specFor(expectedInsertions, falseProbability);
    try {
      boolean created = client.reserve(name, wanted);
      spec = wanted;
      return created;
    } catch (BloomException e) {
      if (e.code() == Status.Code.ALREADY_EXISTS) {
        return false;
      }
      throw e;
    }
  }

  /** Adds {@code item}: true if it was (probably) new. */
  public boolean add(T item) {
    return addItems(List.of(itemOf(item)))[0];
  }

  /** Adds {@code items}: how many were (probably) new. */
  public long add(Collection<? extends T> items) {
    return trues(addItems(itemsOf(items)));
  }

  /** False means {@code item} was never added. */
  public boolean contains(T item) {
    return mightContain(item);
  }

  /** How many of {@code items} might have been added. */
  public long contains(Collection<? extends T> items) {
    return trues(client.mightContain(name, itemsOf(items)));
  }

  /** The items the filter estimates it holds (its distinct adds). */
  public long count() {
    return stats().getEstimatedCardinality();
  }

  /** Deletes the filter: true if it existed. */
  public boolean delete() {
    try {
      client.delete(name);
      return true;
    } catch (BloomException e) {
      if (e.code() == Status.Code.NOT_FOUND) {
        return false;
      }
      throw e;
    }
  }

  /** Whether the filter exists on the server. */
  public boolean isExists() {
    try {
      client.stats(name);
      return true;
    } catch (BloomException e) {
      if (e.code() == Status.Code.NOT_FOUND) {
        return false;
      }
      throw e;
    }
  }

  /** The items the filter was sized for (its spec's capacity). */
  public long getExpectedInsertions() {
    return stats().getSpec().getCapacity();
  }

  /** The false-positive rate it was sized for (its spec's error rate). */
  public double getFalseProbability() {
    return stats().getSpec().getErrorRate();
  }

  /** The filter's size in bits, over all its sub-filters. */
  public long getSize() {
    return stats().getSizeBytes() * 8;
  }

  // ---- Guava's names ------------------------------------------------------------------------

  /** Adds {@code item}: true if it was (probably) new, as Guava's {@code put}. */
  public boolean put(T item) {
    return add(item);
  }

  /** {@link #put} without blocking. */
  public CompletableFuture<Boolean> putAsync(T item) {
    return addItemsAsync(List.of(itemOf(item))).thenApply(added -> added[0]);
  }

  /** Adds every item of {@code items}: true if any was (probably) new. */
  public boolean putAll(Collection<? extends T> items) {
    return add(items) > 0;
  }

  /** False means {@code item} was never added. */
  public boolean mightContain(T item) {
    return client.mightContain(name, List.of(itemOf(item)))[0];
  }

  /** {@link #mightContain} without blocking. */
  public CompletableFuture<Boolean> mightContainAsync(T item) {
    return client.mightContainAsync(name, List.of(itemOf(item))).thenApply(present -> present[0]);
  }

  /** {@link #mightContain}, as a {@link Predicate}. */
  @Override
  public boolean test(T item) {
    return mightContain(item);
  }

  /** The false-positive rate the server estimates the filter has now. */
  public double expectedFpp() {
    return stats().getEstimatedErrorRate();
  }

  /** The items the filter estimates it holds, as Guava's {@code approximateElementCount}. */
  public long approximateElementCount() {
    return stats().getEstimatedCardinality();
  }

  /** The filter's statistics (NOT_FOUND if it does not exist). */
  public FilterStats stats() {
    return client.stats(name);
  }

  // ---- Plumbing -----------------------------------------------------------------------------

  boolean[] addItems(List<byte[]> items) {
    return BloomClient.await(addItemsAsync(items));
  }

  CompletableFuture<boolean[]> addItemsAsync(List<byte[]> items) {
    Spec known = spec;
    return known == null ? client.addAsync(name, items)
                         : client.addOrCreateAsync(name, known, items);
  }

  static long trues(boolean[] answers) {
    long n = 0;
    for (boolean answer : answers) {
      if (answer) {
        n++;
      }
    }
    return n;
  }

  @Override
  public String toString() {
    return getClass().getSimpleName() + "{" + name + "}";
  }
}
