package io.bloomserver.client;

import com.google.common.hash.Funnel;
import com.google.protobuf.ByteString;
import io.bloomserver.bloom.v1.AddRequest;
import io.bloomserver.bloom.v1.AddResponse;
import io.bloomserver.bloom.v1.BloomFilterServiceGrpc;
import io.bloomserver.bloom.v1.CountRequest;
import io.bloomserver.bloom.v1.CountResponse;
import io.bloomserver.bloom.v1.DeleteRequest;
import io.bloomserver.bloom.v1.ExportChunk;
import io.bloomserver.bloom.v1.ExportRequest;
import io.bloomserver.bloom.v1.FilterSpec;
import io.bloomserver.bloom.v1.FilterStats;
import io.bloomserver.bloom.v1.ImportChunk;
import io.bloomserver.bloom.v1.ImportResponse;
import io.bloomserver.bloom.v1.ListRequest;
import io.bloomserver.bloom.v1.ListResponse;
import io.bloomserver.bloom.v1.MergeRequest;
import io.bloomserver.bloom.v1.MightContainRequest;
import io.bloomserver.bloom.v1.RemoveRequest;
import io.bloomserver.bloom.v1.ReserveRequest;
import io.bloomserver.bloom.v1.ReserveResponse;
import io.bloomserver.bloom.v1.StatsRequest;
import io.grpc.CallOptions;
import io.grpc.Channel;
import io.grpc.ClientCall;
import io.grpc.MethodDescriptor;
import io.grpc.Status;
import io.grpc.stub.ClientCallStreamObserver;
import io.grpc.stub.ClientCalls;
import io.grpc.stub.ClientResponseObserver;
import io.grpc.stub.StreamObserver;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Iterator;
import java.util.List;
import java.util.NoSuchElementException;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.Function;

/**
 * The Java client for bloom-server ({@code bloom.v1.BloomFilterService}).
 *
 * <pre>{@code
 * try (BloomClient client = BloomClient.builder("127.0.0.1:50051").build()) {
 *   client.reserve("users", Spec.bloom(1_000_000, 0.01));
 *   boolean[] added = client.add("users", Items.of("alice", "bob"));
 *   boolean[] seen = client.mightContain("users", Items.of("alice", "carol"));
 * }
 * }</pre>
 *
 * <p><b>Items</b> are bytes: a Java string is its UTF-8 bytes ({@link Items}), the same item
 * as the same string in the C++, Python, Go and Node.js clients. Lists longer than the batch
 * size ({@link Builder#batchSize}) go out as several requests, in order; each request is atomic
 * on the server, the list as a whole is not. For typed items, see {@link #bloomFilter} and
 * {@link #cuckooFilter}.
 *
 * <p><b>Blocking and asynchronous.</b> Every call has a blocking form, which throws {@link
 * BloomException}, and an {@code ...Async} form returning a {@link CompletableFuture} that
 * fails with one. Each call has a deadline: the builder's {@link Builder#timeout} (10 s), or the
 * one of {@link #withTimeout}.
 *
 * <p><b>Pipelined mode</b> ({@link Builder#pipelined}): Add, MightContain, Remove and Count
 * calls of up to a batch of items travel over {@code bloom.v1.Pipeline} streams, and concurrent
 * calls of one kind on the same filter from many threads are coalesced into one operation, with
 * no timer: the server then pays per batch, not per call. A broken stream fails its unanswered
 * calls with UNAVAILABLE (retry an add, which is idempotent; a remove may have been made); the
 * next call opens a new stream.
 *
 * <p><b>Replicas.</b> Any pod of a replicated deployment serves any call (followers forward
 * writes to the primary). A target {@code dns:///name:port} (a headless Service) spreads calls
 * over every address the name has and skips a pod that goes away; reads that fail UNAVAILABLE
 * are retried on another pod. Writes answer with a sequence; the client keeps the highest
 * ({@link #lastSequence}) and sends it with every read, so a follower answers a read only once
 * it has applied this client's writes: read-your-writes. {@link #observeSequence} passes a
 * sequence on from another client.
 *
 * <p><b>Sharded deployments.</b> Any pod forwards a call for a filter another group owns, one
 * hop. With {@link Builder#shardRouting}, the client sends each call straight to the owning
 * group's primary instead, and follows the map as slots move.
 *
 * <p>Thread-safety: thread-safe; one client is meant to be shared by a whole process. Close it
 * when done: {@link #close} ends its connections and pipelined streams.
 */
public final class BloomClient implements AutoCloseable {
  private final Builder options;
  private final Duration timeout;
  private final Route seed; // the target's connection, streams and sequence
  private final ShardRoutes routes; // null unless shard routing
  private final ExecutorService transfers; // imports read their InputStream on it
  private final boolean owner; // false for a withTimeout view: close() leaves the connection

  private BloomClient(Builder options) {
    this.options = options;
    this.timeout = options.timeout;
    if (options.shardRouting) {
      ShardRoutes[] made = new ShardRoutes[1]; // the seed's answers tell the routes of versions
      this.seed = new Route(options.target, options, version -> made[0].onMapVersion(version));
      this.routes = made[0] = new ShardRoutes(seed, options);
      try {
        routes.refresh(0);
      } catch (RuntimeException e) {
        // The pod is not up yet: calls go through it, which forwards them, and the first
        // forwarded answer fetches the map.
      }
    } else {
      this.seed = new Route(options.target, options, null);
      this.routes = null;
    }
    this.transfers = Executors.newCachedThreadPool(runnable -> {
      Thread thread = new Thread(runnable, "bloom-client-transfer");
      thread.setDaemon(true);
      return thread;
    });
    this.owner = true;
  }

  private BloomClient(BloomClient parent, Duration timeout) {
    this.options = parent.options;
    this.timeout = timeout;
    this.seed = parent.seed;
    this.routes = parent.routes;
    this.transfers = parent.transfers;
    this.owner = false;
  }

  /** A builder for a client of {@code target}: "host:port", or "dns:///name:port". */
  public static Builder builder(String target) {
    return new Builder(target);
  }

  /** A plaintext client of {@code target} with the defaults. */
  public static BloomClient connect(String target) {
    return builder(target).build();
  }

  /**
   * A view of this client whose calls have deadline {@code timeout}, sharing its connection,
   * streams and sequence; closing the view does nothing. With it, exports and imports (which
   * otherwise have no deadline, a large filter may take long) must finish within it.
   */
  public BloomClient withTimeout(Duration timeout) {
    if (timeout.isNegative() || timeout.isZero()) {
      throw new IllegalArgumentException("timeout must be positive");
    }
    return new BloomClient(this, timeout);
  }

  // ---- Filters ----------------------------------------------------------------------------

  /**
   * Creates filter {@code name}. Reserving an existing name with the same spec returns false
   * (every replica of a service may call it at start-up); with another spec, ALREADY_EXISTS.
   */
  public boolean reserve(String name, Spec spec) {
    return await(reserveAsync(name, spec));
  }

  /** {@link #reserve} without blocking. */
  public CompletableFuture<Boolean> reserveAsync(String name, Spec spec) {
    return reserveCall(
        name, ReserveRequest.newBuilder().setName(name).setSpec(spec.toProto()).build());
  }

  /**
   * Creates an empty filter {@code name} with the spec and hash seed of filter {@code like}, so
   * that the two can be merged; false if it existed already, made like it.
   */
  public boolean reserveLike(String name, String like) {
    return await(reserveLikeAsync(name, like));
  }

  /** {@link #reserveLike} without blocking. */
  public CompletableFuture<Boolean> reserveLikeAsync(String name, String like) {
    return reserveCall(name, ReserveRequest.newBuilder().setName(name).setLike(like).build());
  }

  private CompletableFuture<Boolean> reserveCall(String name, ReserveRequest request) {
    Route route = route(name);
    return unary(route, BloomFilterServiceGrpc.getReserveMethod(), request)
        .thenApply((ReserveResponse response) -> {
          route.raise(response.getSequence());
          return response.getCreated();
        });
  }

  /**
   * ORs filters {@code sources} (made alike: {@link #reserveLike}) into {@code target} and
   * returns the target's stats.
   */
  public FilterStats merge(String target, String... sources) {
    return await(mergeAsync(target, Arrays.asList(sources)));
  }

  /** {@link #merge} without blocking. */
  public CompletableFuture<FilterStats> mergeAsync(String target, List<String> sources) {
    Route route = route(target);
    return unary(route, BloomFilterServiceGrpc.getMergeMethod(),
        MergeRequest.newBuilder().setTarget(target).addAllSources(sources).build())
        .thenApply(response -> {
          route.raise(response.getSequence());
          return response.getStats();
        });
  }

  /** A filter's statistics: NOT_FOUND if it does not exist. */
  public FilterStats stats(String name) {
    return await(statsAsync(name));
  }

  /** {@link #stats} without blocking. */
  public CompletableFuture<FilterStats> statsAsync(String name) {
    Route route = route(name);
    return unary(route, BloomFilterServiceGrpc.getStatsMethod(),
        StatsRequest.newBuilder()
            .setName(name)
            .setMinSequence(route.lastSequence.get())
            .build())
        .thenApply(response -> response.getStats());
  }

  /** Deletes a filter (NOT_FOUND if there is none); the name can be reserved again at once. */
  public void delete(String name) {
    await(deleteAsync(name));
  }

  /** {@link #delete} without blocking. */
  public CompletableFuture<Void> deleteAsync(String name) {
    Route route = route(name);
    return unary(route, BloomFilterServiceGrpc.getDeleteMethod(),
        DeleteRequest.newBuilder().setName(name).build())
        .thenAccept(response -> route.raise(response.getSequence()));
  }

  /**
   * Every filter whose name starts with {@code prefix}, in name order. The iterator reads a
   * page of 1,000 at a time as it goes; its {@code next} and {@code hasNext} throw {@link
   * BloomException} when a page cannot be read.
   */
  public Iterator<FilterStats> list(String prefix) {
    return new ListIterator(prefix);
  }

  /** Every filter whose name starts with {@code prefix}, all pages read, without blocking. */
  public CompletableFuture<List<FilterStats>> listAsync(String prefix) {
    return listFrom(prefix, "", new ArrayList<>());
  }

  private CompletableFuture<List<FilterStats>> listFrom(
      String prefix, String token, List<FilterStats> out) {
    return listPage(prefix, token).thenCompose(page -> {
      out.addAll(page.getFiltersList());
      if (page.getNextPageToken().isEmpty()) {
        return CompletableFuture.completedFuture(out);
      }
      return listFrom(prefix, page.getNextPageToken(), out);
    });
  }

  private CompletableFuture<ListResponse> listPage(String prefix, String token) {
    return unary(seed, BloomFilterServiceGrpc.getListMethod(),
        ListRequest.newBuilder()
            .setPrefix(prefix)
            .setPageSize(1000)
            .setPageToken(token)
            .setMinSequence(seed.lastSequence.get())
            .build());
  }

  // ---- Items ------------------------------------------------------------------------------

  /** Adds {@code items}; {@code added[i]} says items[i] was (probably) new. */
  public boolean[] add(String name, List<byte[]> items) {
    return awaitItems(addCall(name, null, items), items);
  }

  /** Adds one item: true if it was (probably) new. */
  public boolean add(String name, byte[] item) {
    return add(name, List.of(item))[0];
  }

  /** Adds one string (its UTF-8 bytes): true if it was (probably) new. */
  public boolean add(String name, String item) {
    return add(name, Items.utf8(item));
  }

  /** {@link #add(String, List)} without blocking. */
  public CompletableFuture<boolean[]> addAsync(String name, List<byte[]> items) {
    return itemDeadline(addCall(name, null, items), items);
  }

  /** {@link #add(String, List)} that first creates the filter with {@code spec} if missing. */
  public boolean[] addOrCreate(String name, Spec spec, List<byte[]> items) {
    return awaitItems(addCall(name, spec.toProto(), items), items);
  }

  /** {@link #addOrCreate} without blocking. */
  public CompletableFuture<boolean[]> addOrCreateAsync(String name, Spec spec, List<byte[]> items) {
    return itemDeadline(addCall(name, spec.toProto(), items), items);
  }

  private CompletableFuture<boolean[]> addCall(String name, FilterSpec create, List<byte[]> items) {
    Route route = route(name);
    return batched(items, batch -> {
      if (route.coalescer != null) {
        return watched(route.coalescer.call(Coalescer.Kind.ADD, name, create, false, batch));
      }
      AddRequest.Builder request = AddRequest.newBuilder().setName(name).addAllRawItems(batch);
      if (create != null) {
        request.setCreateIfMissing(create);
      }
      return unary(route, BloomFilterServiceGrpc.getAddMethod(), request.build())
          .thenApply((AddResponse response) -> {
            route.raise(response.getSequence());
            return checked(toArray(response.getAddedList()), batch.size());
          });
    });
  }

  /**
   * Checks {@code items}: {@code present[i]} false means items[i] was never added. NOT_FOUND
   * if the filter does not exist.
   */
  public boolean[] mightContain(String name, List<byte[]> items) {
    return awaitItems(checkCall(name, items, false), items);
  }

  /** Checks one item: false means it was never added. */
  public boolean mightContain(String name, byte[] item) {
    return mightContain(name, List.of(item))[0];
  }

  /** Checks one string (its UTF-8 bytes): false means it was never added. */
  public boolean mightContain(String name, String item) {
    return mightContain(name, Items.utf8(item));
  }

  /** {@link #mightContain(String, List)} without blocking. */
  public CompletableFuture<boolean[]> mightContainAsync(String name, List<byte[]> items) {
    return itemDeadline(checkCall(name, items, false), items);
  }

  /**
   * {@link #mightContain(String, List)} where a filter that does not exist answers every item
   * absent (and nothing is created): a per-user "seen this?" check in one call.
   */
  public boolean[] mightContainOrAbsent(String name, List<byte[]> items) {
    return awaitItems(checkCall(name, items, true), items);
  }

  /** {@link #mightContainOrAbsent} without blocking. */
  public CompletableFuture<boolean[]> mightContainOrAbsentAsync(String name, List<byte[]> items) {
    return itemDeadline(checkCall(name, items, true), items);
  }

  private CompletableFuture<boolean[]> checkCall(String name, List<byte[]> items, boolean absent) {
    Route route = route(name);
    return batched(items, batch -> {
      if (route.coalescer != null) {
        return watched(route.coalescer.call(Coalescer.Kind.CHECK, name, null, absent, batch));
      }
      return unary(route, BloomFilterServiceGrpc.getMightContainMethod(),
          MightContainRequest.newBuilder()
              .setName(name)
              .addAllRawItems(batch)
              .setAbsentIfMissing(absent)
              .setMinSequence(route.lastSequence.get())
              .build())
          .thenApply(response -> checked(toArray(response.getPresentList()), batch.size()));
    });
  }

  /**
   * Removes one copy of each item from a cuckoo filter; {@code removed[i]} says the filter
   * held one. FAILED_PRECONDITION for a Bloom filter. Remove only what was added: removing
   * another item can remove a colliding item's copy, which then reads absent. Not idempotent: a
   * retried remove removes another copy.
   */
  public boolean[] remove(String name, List<byte[]> items) {
    return awaitItems(removeCall(name, items), items);
  }

  /** Removes one copy of one item: true if the filter held one. */
  public boolean remove(String name, byte[] item) {
    return remove(name, List.of(item))[0];
  }

  /** {@link #remove(String, List)} without blocking. */
  public CompletableFuture<boolean[]> removeAsync(String name, List<byte[]> items) {
    return itemDeadline(removeCall(name, items), items);
  }

  private CompletableFuture<boolean[]> removeCall(String name, List<byte[]> items) {
    Route route = route(name);
    return batched(items, batch -> {
      if (route.coalescer != null) {
        return watched(route.coalescer.call(Coalescer.Kind.REMOVE, name, null, false, batch));
      }
      return unary(route, BloomFilterServiceGrpc.getRemoveMethod(),
          RemoveRequest.newBuilder().setName(name).addAllRawItems(batch).build())
          .thenApply(response -> {
            route.raise(response.getSequence());
            return checked(toArray(response.getRemovedList()), batch.size());
          });
    });
  }

  /** The copies of each item a cuckoo filter holds (FAILED_PRECONDITION for a Bloom filter). */
  public int[] count(String name, List<byte[]> items) {
    return awaitItems(countCall(name, items), items);
  }

  /** The copies of one item a cuckoo filter holds. */
  public int count(String name, byte[] item) {
    return count(name, List.of(item))[0];
  }

  /** {@link #count(String, List)} without blocking. */
  public CompletableFuture<int[]> countAsync(String name, List<byte[]> items) {
    return itemDeadline(countCall(name, items), items);
  }

  private CompletableFuture<int[]> countCall(String name, List<byte[]> items) {
    List<List<ByteString>> batches;
    try {
      batches = split(items);
    } catch (BloomException e) {
      return CompletableFuture.failedFuture(e);
    }
    CompletableFuture<List<int[]>> chain = CompletableFuture.completedFuture(new ArrayList<>());
    for (List<ByteString> batch : batches) {
      chain = chain.thenCompose(out -> countBatch(name, batch).thenApply(counts -> {
        out.add(counts);
        return out;
      }));
    }
    return chain.thenApply(parts -> {
      int[] all = new int[items.size()];
      int at = 0;
      for (int[] part : parts) {
        System.arraycopy(part, 0, all, at, part.length);
        at += part.length;
      }
      return all;
    });
  }

  private CompletableFuture<int[]> countBatch(String name, List<ByteString> batch) {
    Route route = route(name);
    if (route.coalescer != null) {
      return watched(route.coalescer.count(name, batch))
          .thenCompose(counts
              -> counts != null
                  ? CompletableFuture.completedFuture(counts) // null: not sent, make the unary call
                  : unaryCount(route, name, batch));
    }
    return unaryCount(route, name, batch);
  }

  private CompletableFuture<int[]> unaryCount(
      Route route, String name, List<ByteString> batch) {
    return unary(route, BloomFilterServiceGrpc.getCountMethod(),
        CountRequest.newBuilder()
            .setName(name)
            .addAllRawItems(batch)
            .setMinSequence(route.lastSequence.get())
            .build())
        .thenApply((CountResponse response) -> {
          if (response.getCountsCount() != batch.size()) {
            throw tooFew(response.getCountsCount(), batch.size());
          }
          return response.getCountsList().stream().mapToInt(Integer::intValue).toArray();
        });
  }

  // ---- Dumps ------------------------------------------------------------------------------

  /**
   * Writes the dump of filter {@code name} to {@code out} (not closed). Runs without a
   * deadline unless this is a {@link #withTimeout} view; ABORTED if {@code out} fails.
   */
  public void exportTo(String name, OutputStream out) {
    await(exportToAsync(name, out));
  }

  /**
   * {@link #exportTo} without blocking: the chunks are written to {@code out} on gRPC's
   * threads as they arrive, one at a time and in order.
   */
  public CompletableFuture<Void> exportToAsync(String name, OutputStream out) {
    CompletableFuture<Void> done = new CompletableFuture<>();
    Route route = route(name);
    ClientCall<ExportRequest, ExportChunk> call = route.connection.channel().newCall(
        BloomFilterServiceGrpc.getExportMethod(), transferOptions());
    ClientCalls.asyncServerStreamingCall(call,
        ExportRequest.newBuilder()
            .setName(name)
            .setMinSequence(route.lastSequence.get())
            .build(),
        new ClientResponseObserver<ExportRequest, ExportChunk>() {
          private ClientCallStreamObserver<ExportRequest> stream;

          @Override
          public void beforeStart(ClientCallStreamObserver<ExportRequest> stream) {
            this.stream = stream;
          }

          @Override
          public void onNext(ExportChunk chunk) {
            try {
              chunk.getData().writeTo(out);
            } catch (IOException e) {
              done.completeExceptionally(
                  new BloomException(Status.Code.ABORTED, "writing the dump: " + e, e));
              stream.cancel("the dump could not be written", e);
            }
          }

          @Override
          public void onError(Throwable error) {
            failed(route, done, error);
          }

          @Override
          public void onCompleted() {
            done.complete(null);
          }
        });
    return done;
  }

  /**
   * Creates filter {@code name} from a dump read from {@code in} (not closed) and returns its
   * stats. With {@code mergeIntoExisting}, an existing filter {@code name} (alike the dump's)
   * gets the dump ORed into it instead of failing with ALREADY_EXISTS. Nothing is committed
   * unless the whole dump arrives. ABORTED if {@code in} fails.
   */
  public FilterStats importFrom(String name, InputStream in, boolean mergeIntoExisting) {
    return await(importCall(name, in, mergeIntoExisting));
  }

  /** {@link #importFrom} without blocking: {@code in} is read on a thread of the client's. */
  public CompletableFuture<FilterStats> importFromAsync(
      String name, InputStream in, boolean mergeIntoExisting) {
    return CompletableFuture.supplyAsync(() -> importCall(name, in, mergeIntoExisting), transfers)
        .thenCompose(Function.identity());
  }

  private CompletableFuture<FilterStats> importCall(String name, InputStream in, boolean merge) {
    CompletableFuture<FilterStats> done = new CompletableFuture<>();
    Object ready = new Object();
    Route route = route(name);
    ClientCall<ImportChunk, ImportResponse> call = route.connection.channel().newCall(
        BloomFilterServiceGrpc.getImportMethod(), transferOptions());
    ClientCallStreamObserver<ImportChunk> requests =
        (ClientCallStreamObserver<ImportChunk>) ClientCalls.asyncClientStreamingCall(
            call, new ClientResponseObserver<ImportChunk, ImportResponse>() {
              @Override
              public void beforeStart(ClientCallStreamObserver<ImportChunk> stream) {
                stream.setOnReadyHandler(() -> {
                  synchronized (ready) {
                    ready.notifyAll();
              }
            });
  }

  @Override
  public void onNext(ImportResponse response) {
    route.raise(response.getSequence());
    done.complete(response.getStats());
  }

  @Override
  public void onError(Throwable error) {
    failed(route, done, error);
    synchronized (ready) {
      ready.notifyAll();
    }
  }

  @Override
  public void onCompleted() {
    done.complete(null);
  }
});
byte[] buffer = new byte[1 << 20];
boolean first = true;
try {
  while (!done.isDone()) {
    int n = in.readNBytes(buffer, 0, buffer.length);
    if (n == 0 && !first) {
      break;
    }
    ImportChunk.Builder chunk = ImportChunk.newBuilder().setData(ByteString.copyFrom(buffer, 0, n));
    if (first) {
      chunk.setName(name).setMergeIntoExisting(merge);
      first = false;
    }
    synchronized (ready) { // flow control: hold the dump back while the server cannot take it
      while (!requests.isReady() && !done.isDone()) {
        ready.wait(100);
      }
    }
    if (done.isDone()) {
      break; // the server ended the call: done holds its status
    }
    requests.onNext(chunk.build());
    if (n < buffer.length) {
      break;
    }
  }
  requests.onCompleted();
} catch (IOException e) {
  done.completeExceptionally(new BloomException(Status.Code.ABORTED, "reading the dump: " + e, e));
  requests.cancel("the dump could not be read", e); // nothing is committed
} catch (InterruptedException e) {
  Thread.currentThread().interrupt();
  done.completeExceptionally(BloomException.from(e));
  requests.cancel("interrupted", e);
}
return done;
}

// ---- Health and sequences ---------------------------------------------------------------

/** The server's {@code grpc.health.v1} status of {@code service} ("" for the server's). */
public HealthStatus health(String service) {
  return await(healthAsync(service));
}

/** {@link #health} without blocking. */
public CompletableFuture<HealthStatus> healthAsync(String service) {
  return unary(seed, HealthStatus.CHECK_METHOD, service).thenApply(HealthStatus::fromCode);
}

/** Whether the server says it is SERVING (its overall health). */
public boolean serving() {
  return health("") == HealthStatus.SERVING;
}

/**
 * The highest sequence a write through this client was given. Reads send it as
 * min_sequence, so a follower answers them only once it has applied those writes.
 */
public long lastSequence() {
  return seed.lastSequence.get();
}

/**
 * The version of the shard map this client routes by ({@link Builder#shardRouting}); 0 without
 * shard routing, or for an unsharded deployment.
 */
public long shardMapVersion() {
  return routes == null ? 0 : routes.version();
}

/** Raises {@link #lastSequence} to one learned elsewhere (another client that wrote). */
public void observeSequence(long sequence) {
  seed.raise(sequence);
}

// ---- Typed filters ----------------------------------------------------------------------

/**
 * A typed handle on Bloom filter {@code name} whose items are what {@code funnel} writes
 * (Guava's and Redisson's names). Creates nothing: see {@link RemoteBloomFilter#tryInit}.
 */
public <T> RemoteBloomFilter<T> bloomFilter(String name, Funnel<? super T> funnel) {
  return new RemoteBloomFilter<>(this, name, funnel);
}

/** A typed handle on cuckoo filter {@code name}; creates nothing. */
public <T> RemoteCuckooFilter<T> cuckooFilter(String name, Funnel<? super T> funnel) {
  return new RemoteCuckooFilter<>(this, name, funnel);
}

/** The underlying channel (with the token), for calls this client does not cover. */
public Channel channel() {
  return seed.connection.channel();
}

/** Messages sent on the pipelined streams so far; 0 when not pipelined. For tests. */
long pipelineMessagesSent() {
  return seed.coalescer == null ? 0 : seed.coalescer.messagesSent();
}

/**
 * Ends the pipelined streams (their unanswered calls fail UNAVAILABLE) and the connection.
 * Does nothing on a {@link #withTimeout} view.
 */
@Override
public void close() {
  if (!owner) {
    return;
  }
  if (routes != null) {
    routes.close();
  }
  transfers.shutdownNow();
  seed.close();
}

// ---- Plumbing ---------------------------------------------------------------------------

private CallOptions callOptions() {
  return CallOptions.DEFAULT.withDeadlineAfter(timeout.toNanos(), TimeUnit.NANOSECONDS);
}

/** Exports and imports: no deadline unless this is a withTimeout view. */
private CallOptions transferOptions() {
  return owner ? CallOptions.DEFAULT : callOptions();
}

private <Q, R> CompletableFuture<R> unary(Route route, MethodDescriptor<Q, R> method, Q request) {
  CompletableFuture<R> future = new CompletableFuture<>();
  ClientCall<Q, R> call = route.connection.channel().newCall(method, callOptions());
  ClientCalls.asyncUnaryCall(call, request, new StreamObserver<R>() {
    @Override
    public void onNext(R response) {
      future.complete(response);
    }

    @Override
    public void onError(Throwable error) {
      failed(route, future, error);
    }

    @Override
    public void onCompleted() {
      if (!future.isDone()) {
        future.completeExceptionally(
            new BloomException(Status.Code.INTERNAL, "the server sent no answer"));
      }
    }
  });
  return future;
}

/**
 * Waits for an item call. A pipelined call has no gRPC deadline of its own (it rides a
 * stream): it gets the client's timeout per batch here, without a timer task per call.
 */
private <T> T awaitItems(CompletableFuture<T> future, List<byte[]> items) {
  if (!options.pipelined) {
    return await(future);
  }
  try {
    return future.get(pipelinedNanos(items), TimeUnit.NANOSECONDS);
  } catch (TimeoutException e) {
    throw new BloomException(
        Status.Code.DEADLINE_EXCEEDED, "no answer on the Pipeline stream within " + timeout, e);
  } catch (ExecutionException e) {
    BloomException failure = BloomException.from(e);
    throw new BloomException(failure.code(), failure.serverMessage(), failure);
  } catch (InterruptedException e) {
    throw BloomException.from(e);
  }
}

/** An asynchronous item call, under the same deadline as {@link #awaitItems}. */
private <T> CompletableFuture<T> itemDeadline(CompletableFuture<T> future, List<byte[]> items) {
  if (!options.pipelined) {
    return future;
  }
  return future.orTimeout(pipelinedNanos(items), TimeUnit.NANOSECONDS).handle((value, error) -> {
    if (error != null) {
      throw BloomException.from(error);
    }
    return value;
  });
}

private long pipelinedNanos(List<byte[]> items) {
  long batches = items == null || items.isEmpty() ? 1 : (items.size() - 1) / options.batchSize + 1;
  return timeout.toNanos() * batches;
}

private void failed(Route route, CompletableFuture<?> future, Throwable error) {
  BloomException failure = BloomException.from(error);
  if (failure.code() == Status.Code.UNAVAILABLE) {
    route.connection.noteUnavailable();
  }
  if (routes != null) {
    routes.onError(failure);
  }
  future.completeExceptionally(failure);
}

/** The route of filter {@code name}'s calls: the seed, or with shard routing its group's. */
private Route route(String name) {
  return routes == null ? seed : routes.forName(name);
}

/** A pipelined call's answer, whose failure may say the shard map changed. */
private <T> CompletableFuture<T> watched(CompletableFuture<T> future) {
  if (routes == null) {
    return future;
  }
  return future.whenComplete((value, error) -> {
    if (error != null) {
      routes.onError(error);
    }
  });
}

/** Splits items into batches of at most batchSize, as ByteStrings. */
private List<List<ByteString>> split(List<byte[]> items) {
  if (items == null || items.isEmpty()) {
    throw new BloomException(Status.Code.INVALID_ARGUMENT, "items must not be empty");
  }
  if (items.size() == 1) { // the pipelined mode's usual call
    byte[] item = items.get(0);
    if (item == null) {
      throw new BloomException(Status.Code.INVALID_ARGUMENT, "an item must not be null");
    }
    return List.of(List.of(ByteString.copyFrom(item)));
  }
  List<List<ByteString>> batches = new ArrayList<>((items.size() - 1) / options.batchSize + 1);
  List<ByteString> batch = new ArrayList<>(Math.min(items.size(), options.batchSize));
  for (byte[] item : items) {
    if (item == null) {
      throw new BloomException(Status.Code.INVALID_ARGUMENT, "an item must not be null");
    }
    if (batch.size() == options.batchSize) {
      batches.add(batch);
      batch = new ArrayList<>(Math.min(items.size(), options.batchSize));
    }
    batch.add(ByteString.copyFrom(item));
  }
  batches.add(batch);
  return batches;
}

/** Sends the batches in order, each after the previous one answered, and joins the answers. */
private CompletableFuture<boolean[]> batched(
    List<byte[]> items, Function<List<ByteString>, CompletableFuture<boolean[]>> send) {
  List<List<ByteString>> batches;
  try {
    batches = split(items);
  } catch (BloomException e) {
    return CompletableFuture.failedFuture(e);
  }
  if (batches.size() == 1) {
    return send.apply(batches.get(0));
  }
  boolean[] all = new boolean[items.size()];
  CompletableFuture<Integer> chain = CompletableFuture.completedFuture(0);
  for (List<ByteString> batch : batches) {
    chain = chain.thenCompose(at -> send.apply(batch).thenApply(answers -> {
      System.arraycopy(answers, 0, all, at, answers.length);
      return at + answers.length;
    }));
  }
  return chain.thenApply(at -> all);
}

private static boolean[] toArray(List<Boolean> answers) {
  boolean[] out = new boolean[answers.size()];
  for (int i = 0; i < out.length; i++) {
    out[i] = answers.get(i);
  }
  return out;
}

private static boolean[] checked(boolean[] answers, int items) {
  if (answers.length != items) {
    throw tooFew(answers.length, items);
  }
  return answers;
}

private static BloomException tooFew(int answers, int items) {
  return new BloomException(
      Status.Code.INTERNAL, "the server answered " + answers + " results for " + items + " items");
}

/** Waits for a call; its failure is thrown here, with this thread's stack as well. */
static <T> T await(CompletableFuture<T> future) {
  try {
    return future.get();
  } catch (ExecutionException e) {
    BloomException failure = BloomException.from(e);
    throw new BloomException(failure.code(), failure.serverMessage(), failure);
  } catch (InterruptedException e) {
    future.cancel(false);
    throw BloomException.from(e);
  }
}

/** Pages through List as the iterator is read. */
private final class ListIterator implements Iterator<FilterStats> {
  private final String prefix;
  private Iterator<FilterStats> page = List.<FilterStats>of().iterator();
  private String token = "";
  private boolean last;

  ListIterator(String prefix) {
    this.prefix = Objects.requireNonNull(prefix);
  }

  @Override
  public boolean hasNext() {
    while (!page.hasNext() && !last) {
      ListResponse response = await(listPage(prefix, token));
      page = response.getFiltersList().iterator();
      token = response.getNextPageToken();
      last = token.isEmpty();
    }
    return page.hasNext();
  }

  @Override
  public FilterStats next() {
    if (!hasNext()) {
      throw new NoSuchElementException();
    }
    return page.next();
  }
}

/**
 * How a {@link BloomClient} connects: TLS, mutual TLS, a bearer token, deadlines, batches
 * and the pipelined mode. Thread-safety: not thread-safe; build on one thread.
 */
public static final class Builder {
  final String target;
  String caFile;
  String certFile;
  String keyFile;
  String authority;
  String token;
  Duration timeout = Duration.ofSeconds(10);
  int batchSize = 10_000;
  boolean pipelined;
  int streams = 1;
  boolean shardRouting;

  private Builder(String target) {
    this.target = Objects.requireNonNull(target, "target");
  }

  /** TLS, trusting the CA certificates in PEM file {@code caFile}. */
  public Builder tls(String caFile) {
    this.caFile = Objects.requireNonNull(caFile);
    return this;
  }

  /**
   * Mutual TLS: trusts {@code caFile} and presents the client certificate {@code certFile}
   * with its PKCS#8 PEM key {@code keyFile}, for a server with {@code --tls_client_ca_file}.
   */
  public Builder mutualTls(String caFile, String certFile, String keyFile) {
    this.caFile = Objects.requireNonNull(caFile);
    this.certFile = Objects.requireNonNull(certFile);
    this.keyFile = Objects.requireNonNull(keyFile);
    return this;
  }

  /** The name the server's certificate must have, when not the target's host. */
  public Builder authority(String authority) {
    this.authority = authority;
    return this;
  }

  /** Sends "authorization: Bearer {@code token}" with every call. */
  public Builder token(String token) {
    this.token = token;
    return this;
  }

  /** Each call's deadline (default 10 s). */
  public Builder timeout(Duration timeout) {
    if (timeout.isNegative() || timeout.isZero()) {
      throw new IllegalArgumentException("timeout must be positive");
    }
    this.timeout = timeout;
    return this;
  }

  /** Items per request (default 10,000); longer lists go out as several requests. */
  public Builder batchSize(int batchSize) {
    if (batchSize < 1) {
      throw new IllegalArgumentException("batchSize must be at least 1");
    }
    this.batchSize = batchSize;
    return this;
  }

  /** Sends Add, MightContain, Remove and Count over coalescing Pipeline streams. */
  public Builder pipelined(boolean pipelined) {
    this.pipelined = pipelined;
    return this;
  }

  /**
   * Pipeline streams in pipelined mode (default 1; a filter's calls always use the same
   * one). More spread the server's work over more of its threads.
   */
  public Builder streams(int streams) {
    if (streams < 1) {
      throw new IllegalArgumentException("streams must be at least 1");
    }
    this.streams = streams;
    return this;
  }

  /**
   * Sends each call for a filter straight to the primary of the group that owns it, in a
   * sharded deployment (several groups, a shard map in etcd): the client fetches the map from
   * the target's pod ({@code GetShardMap}), keeps a connection (and in pipelined mode, streams)
   * per group primary, and fetches the map again when a pod's answer says it moved. Without
   * it, any pod serves any call by forwarding it one hop to the owner. An unsharded server
   * answers version 0 and everything goes to the target, as without it. Sequences (read your
   * writes) are then kept per group; {@link #lastSequence} is the target's.
   */
  public Builder shardRouting(boolean shardRouting) {
    this.shardRouting = shardRouting;
    return this;
  }

  /** The client; gRPC connects on first use. INVALID_ARGUMENT if a TLS file is unusable. */
  public BloomClient build() {
    return new BloomClient(this);
  }
}

/** The {@code grpc.health.v1} serving status. */
public enum HealthStatus {
  /** The server did not say. */
  UNKNOWN,
  /** It serves: ready for calls. */
  SERVING,
  /** It runs but does not serve now (starting, draining, a follower catching up). */
  NOT_SERVING,
  /** It does not know the service asked about (a Watch answer; Check says NOT_FOUND). */
  SERVICE_UNKNOWN;

  /**
   * grpc.health.v1.Health/Check, with its two one-field messages encoded here: Debian has no
   * grpc-services, and generating io.grpc.health.v1 classes would clash with it where a user
   * has it.
   */
  static final MethodDescriptor<String, Integer> CHECK_METHOD =
      MethodDescriptor.<String, Integer>newBuilder()
          .setType(MethodDescriptor.MethodType.UNARY)
          .setFullMethodName("grpc.health.v1.Health/Check")
          .setRequestMarshaller(new HealthMarshaller.Request())
          .setResponseMarshaller(new HealthMarshaller.Response())
          .build();

  static HealthStatus fromCode(int code) {
    return code >= 0 && code < values().length ? values()[code] : UNKNOWN;
  }
}
}
