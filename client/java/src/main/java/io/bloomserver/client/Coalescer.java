package io.bloomserver.client;

import com.google.common.util.concurrent.MoreExecutors;
import com.google.protobuf.ByteString;
import io.bloomserver.bloom.v1.AddRequest;
import io.bloomserver.bloom.v1.AddResponse;
import io.bloomserver.bloom.v1.BloomFilterServiceGrpc;
import io.bloomserver.bloom.v1.CountRequest;
import io.bloomserver.bloom.v1.FilterSpec;
import io.bloomserver.bloom.v1.MightContainRequest;
import io.bloomserver.bloom.v1.MightContainResponse;
import io.bloomserver.bloom.v1.OperationError;
import io.bloomserver.bloom.v1.PipelineRequest;
import io.bloomserver.bloom.v1.PipelineResponse;
import io.bloomserver.bloom.v1.RemoveRequest;
import io.bloomserver.bloom.v1.RemoveResponse;
import io.grpc.CallOptions;
import io.grpc.Channel;
import io.grpc.ClientCall;
import io.grpc.Metadata;
import io.grpc.Status;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.IntPredicate;

/**
 * The pipelined mode of {@link BloomClient}: concurrent small Add, MightContain, Remove and
 * Count calls from many threads share a few {@code bloom.v1.Pipeline} streams, and calls of one
 * kind on the same filter that wait together go out as one operation with all their items.
 *
 * <p>Batching without a timer, as RocksDB's write thread does it: a call that finds its stream
 * idle is sent at once, alone; calls that arrive while operations are in flight gather, and once
 * the last of those operations is answered (and its callers woken) they go out, one operation
 * per (kind, filter, create spec). Under load batches grow by themselves; alone, a call costs one round trip. Operations
 * that leave together, on any number of filters (one filter per user), are packed into one
 * message ({@code PipelineRequest.more}, up to {@link #PACKED_BYTES}) once the server's
 * {@code bloom-pipeline-more} header says it reads them. Counts go on a stream only once its
 * {@code bloom-pipeline-count} header says the server takes them; until then a count completes
 * with {@code null} and the client makes the unary call.
 *
 * <p>A merged operation failing with INVALID_ARGUMENT or RESOURCE_EXHAUSTED is retried one call
 * at a time, so each call gets the answer it would have got alone. A broken stream fails its
 * unanswered calls with UNAVAILABLE (an add is idempotent: retry it; a remove is not, and may
 * have been made), or with the server's UNAUTHENTICATED / PERMISSION_DENIED when it refused the
 * token; the next call opens a new stream. These are the semantics of the C++ client's
 * {@code client/coalescer.h} and of the Go, Python and Node.js clients.
 *
 * <p>Answers are delivered on the transport's thread (the stream runs on a direct executor):
 * futures complete there, so asynchronous callers should not block in dependent stages.
 *
 * <p>Thread-safety: thread-safe. Each lane's state is guarded by its {@code lock}; one thread at
 * a time sends on a stream ({@code sendLock}).
 */
final class Coalescer implements AutoCloseable {
  /** Bounds the operations packed into one message (as the other clients). */
  static final int PACKED_BYTES = 1 << 20;

  private static final Metadata.Key<String> PACKS =
      Metadata.Key.of("bloom-pipeline-more", Metadata.ASCII_STRING_MARSHALLER);
  private static final Metadata.Key<String> COUNTS =
      Metadata.Key.of("bloom-pipeline-count", Metadata.ASCII_STRING_MARSHALLER);

  enum Kind { ADD, CHECK, REMOVE, COUNT }

  private final Lane[] lanes;

  /**
   * {@code lastSequence} is raised by writes' answers and sent as min_sequence with reads;
   * {@code onUnavailable} runs when a stream breaks.
   */
  Coalescer(
      Channel channel, int streams, int maxItems, AtomicLong lastSequence, Runnable onUnavailable) {
    lanes = new Lane[Math.max(1, streams)];
    for (int i = 0; i < lanes.length; i++) {
      lanes[i] = new Lane(channel, maxItems, lastSequence, onUnavailable);
    }
  }

  /** Sends an add, check or remove of up to maxItems items; the future holds its answers. */
  CompletableFuture<boolean[]> call(
      Kind kind, String name, FilterSpec create, boolean absent, List<ByteString> items) {
    Pending call = new Pending(kind, name, create, absent, items);
    laneOf(name).submit(call);
    return call.answers;
  }

  /**
   * Sends a count; the future holds the counts, or null when this stream's server has not said
   * it takes counts (make the unary call).
   */
  CompletableFuture<int[]> count(String name, List<ByteString> items) {
    Pending call = new Pending(Kind.COUNT, name, null, false, items);
    laneOf(name).submit(call);
    return call.counts;
  }

  /** Messages sent on every stream so far (the tests see operations packed). */
  long messagesSent() {
    long total = 0;
    for (Lane lane : lanes) {
      synchronized (lane.lock) {
        total += lane.messages;
      }
    }
    return total;
  }

  /** Ends the streams: their unanswered calls fail UNAVAILABLE. */
  @Override
  public void close() {
    for (Lane lane : lanes) {
      lane.close();
    }
  }

  private Lane laneOf(String name) {
    return lanes[Math.floorMod(name.hashCode(), lanes.length)];
  }

  /** One caller's call waiting for its answer. */
  private static final class Pending {
    final Kind kind;
    final String name;
    final FilterSpec create; // an add's create_if_missing; null: none
    final boolean absent; // a check's absent_if_missing
    final List<ByteString> items;
    final CompletableFuture<boolean[]> answers;
    final CompletableFuture<int[]> counts;
    boolean alone; // sent as its own operation (after a merged operation failed); lane.lock

    Pending(Kind kind, String name, FilterSpec create, boolean absent, List<ByteString> items) {
      this.kind = kind;
      this.name = name;
      this.create = create;
      this.absent = absent;
      this.items = items;
      this.answers = kind == Kind.COUNT ? null : new CompletableFuture<>();
      this.counts = kind == Kind.COUNT ? new CompletableFuture<>() : null;
    }

    void fail(Throwable error) {
      if (answers != null) {
        answers.completeExceptionally(error);
      } else {
        counts.completeExceptionally(error);
      }
    }

    /** Which calls may share one operation: same kind, filter and options. */
    Key key() {
      return new Key(kind, name, create, absent);
    }
  }

  private static final class Key {
    final Kind kind;
    final String name;
    final FilterSpec create;
    final boolean absent;

    final int hash;

    Key(Kind kind, String name, FilterSpec create, boolean absent) {
      this.kind = kind;
      this.name = name;
      this.create = create;
      this.absent = absent;
      // No Objects.hash: it boxes and allocates an array, once per call.
      int h = name.hashCode() * 31 + kind.ordinal();
      h = h * 31 + (create == null ? 0 : create.hashCode());
      this.hash = h * 2 + (absent ? 1 : 0);
    }

    @Override
    public boolean equals(Object other) {
      if (!(other instanceof Key)) {
        return false;
      }
      Key key = (Key) other;
      return hash == key.hash && kind == key.kind && absent == key.absent && name.equals(key.name)
          && Objects.equals(create, key.create);
    }

    @Override
    public int hashCode() {
      return hash;
    }
  }

  /** An operation being built, then in flight: its calls in item order. */
  private static final class Operation {
    final long id;
    final Pending first;
    final List<Pending> calls = new ArrayList<>();
    final List<ByteString> items = new ArrayList<>();

    Operation(long id, Pending first) {
      this.id = id;
      this.first = first;
    }

    PipelineRequest toRequest(long minSequence) {
      PipelineRequest.Builder request = PipelineRequest.newBuilder().setId(id);
      switch (first.kind) {
        case ADD:
          AddRequest.Builder add =
              AddRequest.newBuilder().setName(first.name).addAllRawItems(items);
          if (first.create != null) {
            add.setCreateIfMissing(first.create);
          }
          return request.setAdd(add).build();
        case REMOVE:
          return request
              .setRemove(RemoveRequest.newBuilder().setName(first.name).addAllRawItems(items))
              .build();
        case COUNT:
          return request
              .setCount(CountRequest.newBuilder()
                            .setName(first.name)
                            .addAllRawItems(items)
                            .setMinSequence(minSequence))
              .build();
        default:
          return request
              .setMightContain(MightContainRequest.newBuilder()
                                   .setName(first.name)
                                   .addAllRawItems(items)
                                   .setAbsentIfMissing(first.absent)
                                   .setMinSequence(minSequence))
              .build();
      }
    }
  }

  /** One Pipeline stream and the calls waiting for it or answered on it. */
  private static final class Lane {
    final Channel channel;
    final int maxItems;
    final AtomicLong lastSequence;
    final Runnable onUnavailable;
    final Object sendLock = new Object();

    final Object lock = new Object();
    // Guarded by lock:
    List<Pending> waiting = new ArrayList<>();
    Map<Long, Operation> inFlight = new HashMap<>();
    boolean sending; // operations are in flight; the last answer sends what waits
    long nextId = 1;
    ClientCall<PipelineRequest, PipelineResponse> call; // null: no open stream
    boolean packs; // the open stream's server reads a request's `more`
    boolean counts; // the open stream's server takes counts
    long messages;

    Lane(Channel channel, int maxItems, AtomicLong lastSequence, Runnable onUnavailable) {
      this.channel = channel;
      this.maxItems = maxItems;
      this.lastSequence = lastSequence;
      this.onUnavailable = onUnavailable;
    }

    void submit(Pending pending) {
      ClientCall<PipelineRequest, PipelineResponse> stream;
      List<PipelineRequest> batch;
      synchronized (lock) {
        waiting.add(pending);
        if (sending) {
          return;
        }
        sending = true;
        if (call == null) {
          open();
          if (call == null) { // it failed at once, and failed what waited
            return;
          }
        }
        stream = call;
        batch = packLocked(takeBatchLocked());
        sending = !inFlight.isEmpty(); // every call may have been a count not sent
      }
      send(stream, batch);
    }

    void close() {
      ClientCall<PipelineRequest, PipelineResponse> stream;
      synchronized (lock) {
        stream = call;
      }
      if (stream != null) {
        stream.cancel("the client was closed", null); // its listener fails what is unanswered
      }
    }

    /** Opens a stream (lock held). */
    private void open() {
      ClientCall<PipelineRequest, PipelineResponse> stream =
          channel.newCall(BloomFilterServiceGrpc.getPipelineMethod(),
              CallOptions.DEFAULT.withExecutor(MoreExecutors.directExecutor()));
      call = stream;
      packs = false;
      counts = false;
      stream.start(new Reader(stream), new Metadata());
      stream.request(1);
    }

    /**
     * Turns every waiting call into operations, one per run of calls that may share one (up to
     * maxItems items), and records them in flight (lock held).
     */
    private List<PipelineRequest> takeBatchLocked() {
      List<Operation> batch = new ArrayList<>();
      Map<Key, Operation> open = new HashMap<>();
      for (Pending pending : waiting) {
        if (pending.kind == Kind.COUNT && !counts) {
          pending.counts.complete(null);
          continue;
        }
        Key key = pending.key();
        Operation operation = pending.alone ? null : open.get(key);
        if (operation != null && operation.items.size() + pending.items.size() > maxItems) {
          operation = null;
        }
        if (operation == null) {
          operation = new Operation(nextId++, pending);
          batch.add(operation);
          inFlight.put(operation.id, operation);
          if (!pending.alone) {
            open.put(key, operation);
          }
        }
        operation.items.addAll(pending.items);
        operation.calls.add(pending);
      }
      waiting = new ArrayList<>();
      long minSequence = lastSequence.get();
      List<PipelineRequest> requests = new ArrayList<>(batch.size());
      for (Operation operation : batch) {
        requests.add(operation.toRequest(minSequence));
      }
      return requests;
    }

    /**
     * Turns a batch of operations into as few messages as the server reads: the first of each
     * message carries the others in {@code more}, up to PACKED_BYTES (lock held).
     */
    private List<PipelineRequest> packLocked(List<PipelineRequest> batch) {
      if (!packs || batch.size() < 2) {
        messages += batch.size();
        return batch;
      }
      List<PipelineRequest> out = new ArrayList<>();
      PipelineRequest.Builder head = null;
      int size = 0;
      for (PipelineRequest request : batch) {
        int requestSize = request.getSerializedSize();
        if (head != null && size + requestSize <= PACKED_BYTES) {
          head.addMore(request);
          size += requestSize + 4; // its tag and length
          continue;
        }
        if (head != null) {
          out.add(head.build());
        }
        head = request.toBuilder();
        size = requestSize;
      }
      out.add(head.build());
      messages += out.size();
      return out;
    }

    private void send(
        ClientCall<PipelineRequest, PipelineResponse> stream, List<PipelineRequest> batch) {
      synchronized (sendLock) {
        try {
          for (PipelineRequest request : batch) {
            stream.sendMessage(request);
          }
        } catch (RuntimeException e) {
          // The stream was cancelled or closed: its listener fails the calls.
        }
      }
    }

    /** Takes every unanswered call off the lane and marks it idle (lock held). */
    private List<Pending> failAllLocked() {
      List<Pending> calls = new ArrayList<>();
      for (Operation operation : inFlight.values()) {
        calls.addAll(operation.calls);
      }
      calls.addAll(waiting);
      inFlight = new HashMap<>();
      waiting = new ArrayList<>();
      sending = false;
      return calls;
    }

    private void answer(PipelineResponse response) {
      List<Pending> calls;
      OperationError error = response.hasError() ? response.getError() : null;
      synchronized (lock) {
        Operation operation = inFlight.remove(response.getId());
        if (operation == null) {
          return;
        }
        calls = operation.calls;
        if (error != null && calls.size() > 1
            && (error.getCode() == Status.Code.INVALID_ARGUMENT.value()
                || error.getCode() == Status.Code.RESOURCE_EXHAUSTED.value())) {
          for (Pending pending : calls) {
            pending.alone = true;
          }
          waiting.addAll(calls);
          calls = List.of();
        }
      }
      if (error != null) {
        BloomException failure = fromOperation(error);
        for (Pending pending : calls) {
          pending.fail(failure);
        }
        return;
      }
      switch (response.getResultCase()) {
        case COUNT:
          deliverCounts(calls, response.getCount().getCountsList());
          return;
        case ADD:
          raise(response.getAdd().getSequence()); // before the callers hear of their adds
          AddResponse add = response.getAdd();
          deliver(calls, add.getAddedCount(), add::getAdded);
          return;
        case REMOVE:
          raise(response.getRemove().getSequence());
          RemoveResponse remove = response.getRemove();
          deliver(calls, remove.getRemovedCount(), remove::getRemoved);
          return;
        case MIGHT_CONTAIN:
          MightContainResponse check = response.getMightContain();
          deliver(calls, check.getPresentCount(), check::getPresent);
          return;
        default:
          BloomException failure = new BloomException(
              Status.Code.INTERNAL, "the server answered an operation with no result");
          for (Pending pending : calls) {
            pending.fail(failure);
          }
      }
    }

    /**
     * Once every operation in flight is answered, sends the calls that gathered meanwhile. It
     * runs after the answers were delivered, not before as the C++ client does: grpc-java
     * writes a message sent from the transport's thread only once that thread is free again,
     * so sending first would not reach the server sooner, and the batch would miss the calls
     * that the woken callers make while the others are being woken.
     */
    private void sendWhatGathered(ClientCall<PipelineRequest, PipelineResponse> stream) {
      List<PipelineRequest> batch = null;
      synchronized (lock) {
        if (call != stream || !inFlight.isEmpty()) {
          return;
        }
        if (!waiting.isEmpty()) {
          batch = packLocked(takeBatchLocked());
        }
        sending = !inFlight.isEmpty();
      }
      if (batch != null && !batch.isEmpty()) {
        send(stream, batch);
      }
    }

    private void raise(long sequence) {
      lastSequence.accumulateAndGet(sequence, Math::max);
    }

    /** Gives each call its own items' answers, in item order. */
    private static void deliver(List<Pending> calls, int size, IntPredicate answer) {
      int start = 0;
      for (Pending pending : calls) {
        int end = start + pending.items.size();
        if (end > size) {
          pending.fail(tooFew(size));
          continue;
        }
        boolean[] mine = new boolean[end - start];
        for (int i = start; i < end; i++) {
          mine[i - start] = answer.test(i);
        }
        pending.answers.complete(mine);
        start = end;
      }
    }

    private static void deliverCounts(List<Pending> calls, List<Integer> answers) {
      int start = 0;
      for (Pending pending : calls) {
        int end = start + pending.items.size();
        if (end > answers.size()) {
          pending.fail(tooFew(answers.size()));
          continue;
        }
        int[] mine = new int[end - start];
        for (int i = start; i < end; i++) {
          mine[i - start] = answers.get(i);
        }
        pending.counts.complete(mine);
        start = end;
      }
    }

    private static BloomException tooFew(int answers) {
      return new BloomException(Status.Code.INTERNAL,
          "the server answered " + answers + " results for an operation of more items");
    }

    /** The stream's listener: its headers, answers and end. */
    private final class Reader extends ClientCall.Listener<PipelineResponse> {
      private final ClientCall<PipelineRequest, PipelineResponse> stream;

      Reader(ClientCall<PipelineRequest, PipelineResponse> stream) {
        this.stream = stream;
      }

      @Override
      public void onHeaders(Metadata headers) {
        // Whether the server reads `more` (an older server would ignore the packed operations
        // and never answer them) and takes counts (an older one ends the stream on one).
        synchronized (lock) {
          if (call == stream) {
            packs = "1".equals(headers.get(PACKS));
            counts = "1".equals(headers.get(COUNTS));
          }
        }
      }

      @Override
      public void onMessage(PipelineResponse response) {
        // A packed message's answers come in one response: its own, then its `more`'s.
        answer(response);
        for (PipelineResponse part : response.getMoreList()) {
          answer(part);
        }
        stream.request(1);
        sendWhatGathered(stream);
      }

      @Override
      public void onClose(Status status, Metadata trailers) {
        BloomException failure;
        if (status.getCode() == Status.Code.UNAUTHENTICATED
            || status.getCode() == Status.Code.PERMISSION_DENIED) {
          failure = new BloomException(status.getCode(), BloomException.describe(status));
        } else {
          failure = new BloomException(Status.Code.UNAVAILABLE,
              "the Pipeline stream ended: " + BloomException.describe(status) + " ("
                  + status.getCode() + "); an add may be retried, a remove may have been made");
        }
        List<Pending> calls;
        synchronized (lock) {
          // Only this listener clears `call`, so every call in flight or waiting is this
          // stream's.
          if (call == stream) {
            call = null;
          }
          calls = failAllLocked();
        }
        if (status.getCode() != Status.Code.OK && status.getCode() != Status.Code.CANCELLED) {
          onUnavailable.run();
        }
        for (Pending pending : calls) {
          pending.fail(failure);
        }
      }
    }
  }

  /** An operation's error as the unary call's. */
  static BloomException fromOperation(OperationError error) {
    Status.Code code = Status.Code.UNKNOWN;
    if (error.getCode() >= 0 && error.getCode() < Status.Code.values().length) {
      code = Status.fromCodeValue(error.getCode()).getCode();
    }
    return new BloomException(code, error.getMessage());
  }
}
