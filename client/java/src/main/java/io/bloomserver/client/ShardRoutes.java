package io.bloomserver.client;

import io.bloomserver.bloom.v1.BloomFilterServiceGrpc;
import io.bloomserver.bloom.v1.GetShardMapRequest;
import io.bloomserver.bloom.v1.ShardGroup;
import io.bloomserver.bloom.v1.ShardMap;
import io.bloomserver.bloom.v1.SlotRange;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.zip.CRC32;

/**
 * A client's copy of its sharded deployment's map ({@code bloom.v1 GetShardMap}), to send each
 * call for a filter straight to the primary of the group that owns the filter's slot instead of
 * through a pod that would forward it ({@link BloomClient.Builder#shardRouting}). The C++
 * client's {@code client/shard_routes.h} and the Python client's {@code bloom_shards.py} do the
 * same.
 *
 * <p>A filter's slot is the CRC-32 (zlib's, {@link CRC32}) of its name's UTF-8 bytes modulo the
 * deployment's slot count; a name with a hash tag, {@code feed:{user42}:seen}, hashes only the
 * tag, so filters that share it share a slot (and a group) and can be merged.
 *
 * <p>The copy is fetched again when an answer says it is stale: a forwarded answer's {@code
 * bloom-shard-map-version} header names a later version (one fetch per version), or an error
 * says a filter belongs to another group (a pod's refusal while the map changes; at most one
 * fetch each 100 ms). Fetches run on a thread of their own, never on gRPC's: calls meanwhile go
 * where the copy says, and the pods forward what it gets wrong. An unsharded server (map
 * version 0) or one that predates sharding (UNIMPLEMENTED) routes everything to the seed.
 *
 * <p>Thread-safety: thread-safe.
 */
final class ShardRoutes implements AutoCloseable {
  /** Told the map version a pod's answer names (its {@code bloom-shard-map-version}). */
  interface VersionListener {
    void onMapVersion(long version);
  }

  /** The least time between two fetches that errors ask for. */
  private static final long REFRESH_INTERVAL_NANOS = TimeUnit.MILLISECONDS.toNanos(100);

  private final Route seed;
  private final BloomClient.Builder options;
  private final Duration timeout;
  private final ExecutorService fetcher;
  private final Object refreshLock = new Object(); // one fetch at a time
  private long lastRefreshNanos; // guarded by refreshLock
  private boolean refreshedOnce; // guarded by refreshLock
  private final Object lock = new Object();
  private long version; // guarded by lock
  private Route[] owners = new Route[0]; // per slot, null: the seed; guarded by lock
  private Map<String, Route> byAddress = new HashMap<>(); // guarded by lock
  // Routes to former primaries: a call may still be using one; closed with the client.
  private final List<Route> retired = new ArrayList<>(); // guarded by lock
  private boolean closed; // guarded by lock

  ShardRoutes(Route seed, BloomClient.Builder options) {
    this.seed = seed;
    this.options = options;
    this.timeout = options.timeout;
    this.fetcher = Executors.newSingleThreadExecutor(runnable -> {
      Thread thread = new Thread(runnable, "bloom-client-shard-map");
      thread.setDaemon(true);
      return thread;
    });
  }

  /** The bytes of {@code name} its slot hashes: its hash tag, or all of it. */
  static byte[] hashedPart(String name) {
    byte[] raw = name.getBytes(StandardCharsets.UTF_8);
    int start = indexOf(raw, (byte) '{', 0);
    if (start < 0) {
      return raw;
    }
    int end = indexOf(raw, (byte) '}', start + 1);
    if (end < 0 || end == start + 1) {
      return raw;
    }
    byte[] tag = new byte[end - start - 1];
    System.arraycopy(raw, start + 1, tag, 0, tag.length);
    return tag;
  }

  /** The slot of filter {@code name} among {@code slotCount} (0 counts as 1). */
  static int slotOf(String name, int slotCount) {
    CRC32 crc = new CRC32();
    crc.update(hashedPart(name));
    return (int) (crc.getValue() % Math.max(1, slotCount));
  }

  private static int indexOf(byte[] bytes, byte wanted, int from) {
    for (int i = from; i < bytes.length; i++) {
      if (bytes[i] == wanted) {
        return i;
      }
    }
    return -1;
  }

  /**
   * Fetches the map from the seed now, on the caller's thread: nothing changes for an
   * unsharded server. With {@code atLeast}, only if this copy is older than that version
   * (another thread may have fetched it meanwhile). Throws the fetch's failure.
   */
  void refresh(long atLeast) {
    synchronized (refreshLock) {
      if (atLeast != 0 && version() >= atLeast) {
        return;
      }
      lastRefreshNanos = System.nanoTime();
      refreshedOnce = true;
      ShardMap map;
      try {
        map = BloomFilterServiceGrpc.newBlockingStub(seed.connection.channel())
                  .withDeadlineAfter(timeout.toNanos(), TimeUnit.NANOSECONDS)
                  .getShardMap(GetShardMapRequest.getDefaultInstance())
                  .getMap();
      } catch (StatusRuntimeException e) {
        if (e.getStatus().getCode() == Status.Code.UNIMPLEMENTED) {
          return; // a server that predates sharding: everything through the seed
        }
        throw e;
      }
      install(map);
    }
  }

  private void install(ShardMap map) {
    synchronized (lock) {
      if (closed || map.getVersion() <= version) {
        return; // never back
      }
      Map<String, Route> addresses = new HashMap<>();
      Map<String, Route> byGroup = new HashMap<>();
      for (ShardGroup group : map.getGroupsList()) {
        if (group.getPrimary().isEmpty()) {
          continue; // none now: its filters go through the seed, which forwards them
        }
        Route route = addresses.get(group.getPrimary());
        if (route == null) {
          route = byAddress.get(group.getPrimary());
        }
        if (route == null) {
          route = new Route(group.getPrimary(), options, this::onMapVersion);
        }
        addresses.put(group.getPrimary(), route);
        byGroup.put(group.getName(), route);
      }
      Route[] slots = new Route[map.getSlotCount()];
      for (SlotRange range : map.getRangesList()) {
        Route owner = byGroup.get(range.getGroup());
        for (long slot = range.getFirst(); slot <= range.getLast() && slot < slots.length;
             slot++) {
          slots[(int) slot] = owner;
        }
      }
      for (Map.Entry<String, Route> kept : byAddress.entrySet()) {
        if (!addresses.containsKey(kept.getKey())) {
          retired.add(kept.getValue());
        }
      }
      version = map.getVersion();
      owners = slots;
      byAddress = addresses;
    }
  }

  /** The route that serves filter {@code name}: its group's primary, or the seed. */
  Route forName(String name) {
    synchronized (lock) {
      if (owners.length == 0) {
        return seed;
      }
      Route owner = owners[slotOf(name, owners.length)];
      return owner != null ? owner : seed;
    }
  }

  long version() {
    synchronized (lock) {
      return version;
    }
  }

  /** An answer named map {@code named}: fetch a later one, or look again if forwarded anyway. */
  void onMapVersion(long named) {
    if (named > version()) {
      fetchLater(named);
    } else {
      fetchIfDue(); // forwarded though this copy is as recent: a group without a primary
    }
  }

  /** After a failed call: a pod's refusal of a filter another group owns fetches the map. */
  void onError(Throwable error) {
    BloomException failure = BloomException.from(error);
    if (failure.code() == Status.Code.UNAVAILABLE
        && failure.getMessage() != null && failure.getMessage().contains("belongs to group")) {
      fetchIfDue();
    }
  }

  private void fetchIfDue() {
    synchronized (refreshLock) {
      if (refreshedOnce && System.nanoTime() - lastRefreshNanos < REFRESH_INTERVAL_NANOS) {
        return;
      }
    }
    fetchLater(0);
  }

  private void fetchLater(long atLeast) {
    try {
      fetcher.execute(() -> {
        try {
          refresh(atLeast);
        } catch (RuntimeException e) {
          // A failed fetch keeps the copy: the pods forward meanwhile.
        }
      });
    } catch (RejectedExecutionException e) {
      // Closed.
    }
  }

  /** Ends the fetches and every group's route (not the seed's). */
  @Override
  public void close() {
    fetcher.shutdownNow();
    List<Route> routes;
    synchronized (lock) {
      closed = true;
      routes = new ArrayList<>(byAddress.values());
      routes.addAll(retired);
      byAddress = new HashMap<>();
      retired.clear();
      owners = new Route[0];
    }
    for (Route route : routes) {
      route.close();
    }
  }
}
