package io.bloomserver.client;

import java.util.concurrent.atomic.AtomicLong;

/**
 * Where a {@link BloomClient} sends the calls for some filters: a connection, its pipelined
 * streams, and the highest sequence of the writes made through it. A client has one route to
 * its own target, and with shard routing ({@link BloomClient.Builder#shardRouting}) one more
 * per group primary of its sharded deployment ({@link ShardRoutes}): sequences are a group's
 * own, so read-your-writes is kept per route.
 *
 * <p>Thread-safety: thread-safe.
 */
final class Route implements AutoCloseable {
  final String address;
  final Connection connection;
  final AtomicLong lastSequence = new AtomicLong();
  final Coalescer coalescer; // null unless pipelined

  Route(String address, BloomClient.Builder options, ShardRoutes.VersionListener onMapVersion) {
    this.address = address;
    this.connection = new Connection(address, options, onMapVersion);
    this.coalescer = options.pipelined ? new Coalescer(connection.channel(), options.streams,
                         options.batchSize, lastSequence, connection::noteUnavailable)
                                       : null;
  }

  /** Raises the sequence to a write's. */
  void raise(long sequence) {
    lastSequence.accumulateAndGet(sequence, Math::max);
  }

  /** Ends the pipelined streams (their unanswered calls fail UNAVAILABLE) and the connection. */
  @Override
  public void close() {
    if (coalescer != null) {
      coalescer.close();
    }
    connection.close();
  }
}
