package io.bloomserver.client;

import com.google.protobuf.Duration;
import io.bloomserver.bloom.v1.FilterKind;
import io.bloomserver.bloom.v1.FilterSpec;
import java.util.Objects;

/**
 * How a filter is sized and grows ({@code bloom.v1.FilterSpec}): the items it should hold and
 * the false-positive rate it keeps at that size, for a Bloom filter or a cuckoo filter.
 *
 * <pre>{@code
 * Spec users = Spec.bloom(1_000_000, 0.01);
 * Spec feed = Spec.bloom(10_000, 0.001).window(Duration.ofDays(7), 7).idleTtl(Duration.ofDays(30));
 * Spec carts = Spec.cuckoo(100_000, 0.001); // can remove and count items
 * }</pre>
 *
 * <p>Thread-safety: immutable; each {@code with}-style method returns a new Spec.
 */
public final class Spec {
  private final FilterSpec proto;

  private Spec(FilterSpec proto) {
    this.proto = proto;
  }

  /** A Bloom filter for {@code capacity} items at false-positive rate {@code errorRate}. */
  public static Spec bloom(long capacity, double errorRate) {
    return new Spec(FilterSpec.newBuilder()
                        .setCapacity(capacity)
                        .setErrorRate(errorRate)
                        .setKind(FilterKind.FILTER_KIND_BLOOM)
                        .build());
  }

  /**
   * A cuckoo filter for {@code capacity} items at false-positive rate {@code errorRate}: it can
   * {@link BloomClient#remove remove} and {@link BloomClient#count count} items, and has no
   * window.
   */
  public static Spec cuckoo(long capacity, double errorRate) {
    return new Spec(FilterSpec.newBuilder()
                        .setCapacity(capacity)
                        .setErrorRate(errorRate)
                        .setKind(FilterKind.FILTER_KIND_CUCKOO)
                        .build());
  }

  /** The Spec of a {@code bloom.v1.FilterSpec}, e.g. from {@code FilterStats.getSpec()}. */
  public static Spec fromProto(FilterSpec proto) {
    return new Spec(Objects.requireNonNull(proto));
  }

  /** Each sub-filter added when the filter is full holds this many times more (0: 2). */
  public Spec expansion(int expansion) {
    return new Spec(proto.toBuilder().setExpansion(expansion).build());
  }

  /** A filter that does not grow: adds past capacity fail with RESOURCE_EXHAUSTED. */
  public Spec nonScaling() {
    return new Spec(proto.toBuilder().setNonScaling(true).build());
  }

  /**
   * A filter that forgets items added longer ago than {@code window}, kept in {@code slices}
   * slices (0: the server's default, 8). Bloom filters only.
   */
  public Spec window(java.time.Duration window, int slices) {
    return new Spec(proto.toBuilder().setWindow(toProto(window)).setWindowSlices(slices).build());
  }

  /** Deletes the filter after {@code ttl} without an Add or MightContain. */
  public Spec idleTtl(java.time.Duration ttl) {
    return new Spec(proto.toBuilder().setIdleTtl(toProto(ttl)).build());
  }

  /** The items the filter is sized for. */
  public long capacity() {
    return proto.getCapacity();
  }

  /** The false-positive rate it keeps at capacity. */
  public double errorRate() {
    return proto.getErrorRate();
  }

  /** Whether this is a cuckoo filter. */
  public boolean isCuckoo() {
    return proto.getKind() == FilterKind.FILTER_KIND_CUCKOO;
  }

  /** The wire form. */
  public FilterSpec toProto() {
    return proto;
  }

  @Override
  public boolean equals(Object other) {
    return other instanceof Spec && ((Spec) other).proto.equals(proto);
  }

  @Override
  public int hashCode() {
    return proto.hashCode();
  }

  @Override
  public String toString() {
    return "Spec{" + proto.toString().trim().replace('\n', ' ') + "}";
  }

  private static Duration toProto(java.time.Duration duration) {
    return Duration.newBuilder()
        .setSeconds(duration.getSeconds())
        .setNanos(duration.getNano())
        .build();
  }
}
