package io.bloomserver.client;

import io.grpc.CallOptions;
import io.grpc.Channel;
import io.grpc.ClientCall;
import io.grpc.ClientInterceptor;
import io.grpc.ClientInterceptors;
import io.grpc.ConnectivityState;
import io.grpc.ForwardingClientCall;
import io.grpc.ForwardingClientCallListener;
import io.grpc.ManagedChannel;
import io.grpc.Metadata;
import io.grpc.MethodDescriptor;
import io.grpc.netty.GrpcSslContexts;
import io.grpc.netty.NettyChannelBuilder;
import io.netty.handler.ssl.BloomClientJdkAlpn;
import io.netty.handler.ssl.SslContext;
import io.netty.handler.ssl.SslContextBuilder;
import java.io.File;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import javax.net.ssl.SSLException;

/**
 * The gRPC channel under a {@link BloomClient}: TLS, the bearer token, round-robin over every
 * address of the target, retried reads, and fast reconnection.
 *
 * <p>Reconnection: grpc-java waits 1 s after a failed connection attempt, growing to 2 min,
 * and fails calls at once meanwhile. A pod that restarts, or rebuilds its server in a new role
 * when the primary fails over, is back within a second or so. After a call fails UNAVAILABLE,
 * {@link #noteUnavailable()} resets that backoff every 150 ms until the channel is READY again
 * (or 30 s pass without a failure), so the client is back within 100-200 ms of the server.
 *
 * <p>Thread-safety: thread-safe.
 */
final class Connection implements AutoCloseable {
  /** Polls while a server is away: well under the 100-200 ms a reconnect may take. */
  private static final long POLL_MILLIS = 150;
  /** Stops polling after this long without a failed call (the next failure starts it again). */
  private static final long QUIET_MILLIS = 30_000;

  private final ManagedChannel managed;
  private final Channel channel; // managed, with the token interceptor
  private final ScheduledExecutorService poller;
  private final Object lock = new Object();
  private ScheduledFuture<?> polling; // guarded by lock; null: not polling
  private long lastFailureNanos; // guarded by lock

  /**
   * {@code onMapVersion} (null: none) is told the shard map version that answers name in their
   * {@code bloom-shard-map-version} header (ShardRoutes).
   */
  Connection(
      String target, BloomClient.Builder options, ShardRoutes.VersionListener onMapVersion) {
    NettyChannelBuilder builder =
        NettyChannelBuilder.forTarget(target)
            .maxInboundMessageSize(Integer.MAX_VALUE) // an answer grows with its batch
            .defaultServiceConfig(serviceConfig())
            .enableRetry();
    if (options.caFile != null || options.certFile != null) {
      builder.sslContext(sslContext(options));
      if (options.authority != null) {
        builder.overrideAuthority(options.authority);
      }
    } else {
      builder.usePlaintext();
    }
    managed = builder.build();
    List<ClientInterceptor> interceptors = new ArrayList<>();
    if (options.token != null) {
      interceptors.add(new TokenInterceptor(options.token));
    }
    if (onMapVersion != null) {
      interceptors.add(new MapVersionInterceptor(onMapVersion));
    }
    channel = ClientInterceptors.intercept(managed, interceptors);
    poller = Executors.newSingleThreadScheduledExecutor(runnable -> {
      Thread thread = new Thread(runnable, "bloom-client-reconnect");
      thread.setDaemon(true);
      return thread;
    });
  }

  Channel channel() {
    return channel;
  }

  ManagedChannel managed() {
    return managed;
  }

  /** A call failed UNAVAILABLE: drive the reconnection until the channel is READY. */
  void noteUnavailable() {
    synchronized (lock) {
      lastFailureNanos = System.nanoTime();
      if (polling != null || poller.isShutdown()) {
        return;
      }
      managed.resetConnectBackoff();
      polling = poller.scheduleWithFixedDelay(
          this::poll, POLL_MILLIS, POLL_MILLIS, TimeUnit.MILLISECONDS);
    }
  }

  private void poll() {
    ConnectivityState state = managed.getState(true);
    synchronized (lock) {
      boolean quiet =
          System.nanoTime() - lastFailureNanos > TimeUnit.MILLISECONDS.toNanos(QUIET_MILLIS);
      if (state == ConnectivityState.READY || state == ConnectivityState.SHUTDOWN || quiet) {
        polling.cancel(false);
        polling = null;
        return;
      }
    }
    if (state == ConnectivityState.TRANSIENT_FAILURE || state == ConnectivityState.IDLE) {
      managed.resetConnectBackoff();
    }
  }

  @Override
  public void close() {
    poller.shutdownNow();
    managed.shutdownNow();
    try {
      managed.awaitTermination(5, TimeUnit.SECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  private static SslContext sslContext(BloomClient.Builder options) {
    File ca = options.caFile == null ? null : new File(options.caFile);
    File cert = options.certFile == null ? null : new File(options.certFile);
    File key = options.keyFile == null ? null : new File(options.keyFile);
    try {
      SslContextBuilder ssl = GrpcSslContexts.forClient();
      if (ca != null) {
        ssl.trustManager(ca);
      }
      if (cert != null) {
        ssl.keyManager(cert, key);
      }
      try {
        return ssl.build();
      } catch (UnsupportedOperationException noAlpn) {
        // A netty without JDK ALPN (Debian's): the same through netty's Java 9 engine.
        return BloomClientJdkAlpn.forClient(ca, cert, key);
      }
    } catch (SSLException | IllegalArgumentException e) {
      throw new BloomException(
          io.grpc.Status.Code.INVALID_ARGUMENT, "cannot set up TLS: " + e.getMessage(), e);
    }
  }

  /**
   * round_robin: a target that names several pods (a headless Service's DNS name) gets a
   * connection to each and spreads calls over those that answer; one address behaves as
   * pick_first. Reads (which change nothing) are retried on UNAVAILABLE (and UNKNOWN), which also
   * moves them to another pod; writes are not: an add whose answer was lost may have been made (the
   * caller retries it, knowing that), and a remove must not be made twice.
   */
  private static Map<String, Object> serviceConfig() {
    List<Object> reads =
        List.of(method("MightContain"), method("Count"), method("Stats"), method("List"));
    Map<String, Object> retry = Map.of("maxAttempts", 3.0, "initialBackoff", "0.01s", "maxBackoff",
        "0.1s", "backoffMultiplier", 2.0,
        // UNKNOWN: grpc-java 1.41 fails a call sent on a connection that just closed
        // (ClosedChannelException) with UNKNOWN "channel closed", not UNAVAILABLE.
        "retryableStatusCodes", List.of("UNAVAILABLE", "UNKNOWN"));
    return Map.of("loadBalancingConfig", List.of(Map.of("round_robin", Map.of())), "methodConfig",
        List.of(Map.of("name", reads, "retryPolicy", retry)));
  }

  private static Map<String, Object> method(String name) {
    return Map.of("service", "bloom.v1.BloomFilterService", "method", name);
  }

  /** Tells a listener the map version an answer's headers name (forwarded answers do). */
  private static final class MapVersionInterceptor implements ClientInterceptor {
    private static final Metadata.Key<String> MAP_VERSION =
        Metadata.Key.of("bloom-shard-map-version", Metadata.ASCII_STRING_MARSHALLER);
    private final ShardRoutes.VersionListener listener;

    MapVersionInterceptor(ShardRoutes.VersionListener listener) {
      this.listener = listener;
    }

    @Override
    public <Q, R> ClientCall<Q, R> interceptCall(
        MethodDescriptor<Q, R> method, CallOptions options, Channel next) {
      return new ForwardingClientCall.SimpleForwardingClientCall<Q, R>(
          next.newCall(method, options)) {
        @Override
        public void start(Listener<R> responses, Metadata headers) {
          super.start(new ForwardingClientCallListener.SimpleForwardingClientCallListener<R>(
                          responses) {
            @Override
            public void onHeaders(Metadata answerHeaders) {
              String named = answerHeaders.get(MAP_VERSION);
              if (named != null) {
                try {
                  listener.onMapVersion(Long.parseLong(named.trim()));
                } catch (NumberFormatException e) {
                  // Not a version: nothing to learn from it.
                }
              }
              super.onHeaders(answerHeaders);
            }
          }, headers);
        }
      };
    }
  }

  /** Sends "authorization: Bearer TOKEN" with every call. */
  private static final class TokenInterceptor implements ClientInterceptor {
    private static final Metadata.Key<String> AUTHORIZATION =
        Metadata.Key.of("authorization", Metadata.ASCII_STRING_MARSHALLER);
    private final String header;

    TokenInterceptor(String token) {
      header = "Bearer " + token;
    }

    @Override
    public <Q, R> ClientCall<Q, R> interceptCall(
        MethodDescriptor<Q, R> method, CallOptions options, Channel next) {
      return new ForwardingClientCall.SimpleForwardingClientCall<Q, R>(
          next.newCall(method, options)) {
        @Override
        public void start(Listener<R> listener, Metadata headers) {
          headers.put(AUTHORIZATION, header);
          super.start(listener, headers);
        }
      };
    }
  }
}
