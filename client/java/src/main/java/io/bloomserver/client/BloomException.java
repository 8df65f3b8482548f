package io.bloomserver.client;

import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import java.nio.channels.ClosedChannelException;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeoutException;

/**
 * The one exception every {@link BloomClient} call fails with: the gRPC status code and the
 * server's message (which names the offending field, e.g. {@code error_rate must be in (0, 1)}).
 *
 * <p>Unchecked, as Guava's and Redisson's filters are. {@link #code()} tells what to do:
 * {@code NOT_FOUND} (no such filter), {@code INVALID_ARGUMENT} (bad input, do not retry),
 * {@code UNAVAILABLE} (no server reachable, or a pipelined stream broke: an add may be retried,
 * a remove may have been made), {@code DEADLINE_EXCEEDED}, {@code UNAUTHENTICATED} /
 * {@code PERMISSION_DENIED} (the token), {@code RESOURCE_EXHAUSTED} (a server limit).
 *
 * <p>Thread-safety: immutable.
 */
public final class BloomException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  private final Status.Code code;

  /** An exception with {@code code} and the server's (or this client's) message. */
  public BloomException(Status.Code code, String message) {
    super(code + ": " + message);
    this.code = code;
  }

  /** The same, with the exception that caused it. */
  public BloomException(Status.Code code, String message, Throwable cause) {
    super(code + ": " + message, cause);
    this.code = code;
  }

  /** The gRPC status code. */
  public Status.Code code() {
    return code;
  }

  /** The message without the code in front: what the server said. */
  public String serverMessage() {
    String text = getMessage();
    int colon = text.indexOf(": ");
    return colon < 0 ? text : text.substring(colon + 2);
  }

  /**
   * Converts whatever a call or future failed with into a BloomException: a gRPC status as it
   * is, a future's wrappers unwrapped, a timeout as DEADLINE_EXCEEDED, a cancellation as
   * CANCELLED, anything else as INTERNAL.
   */
  public static BloomException from(Throwable error) {
    Throwable cause = error;
    while ((cause instanceof CompletionException || cause instanceof ExecutionException)
        && cause.getCause() != null) {
      cause = cause.getCause();
    }
    if (cause instanceof BloomException) {
      return (BloomException) cause;
    }
    Status status = null;
    if (cause instanceof StatusRuntimeException) {
      status = ((StatusRuntimeException) cause).getStatus();
    } else if (cause instanceof io.grpc.StatusException) {
      status = ((io.grpc.StatusException) cause).getStatus();
    }
    if (status != null) {
      Status.Code code = status.getCode();
      if (code == Status.Code.UNKNOWN && status.getCause() instanceof ClosedChannelException) {
        // grpc-java 1.41's code for a call whose connection closed under it: the server went
        // away, which every other path reports as UNAVAILABLE.
        code = Status.Code.UNAVAILABLE;
      }
      return new BloomException(code, describe(status), cause);
    }
    if (cause instanceof TimeoutException) {
      return new BloomException(Status.Code.DEADLINE_EXCEEDED, "the call's deadline passed", cause);
    }
    if (cause instanceof CancellationException) {
      return new BloomException(Status.Code.CANCELLED, "the call was cancelled", cause);
    }
    if (cause instanceof InterruptedException) {
      Thread.currentThread().interrupt();
      return new BloomException(Status.Code.CANCELLED, "interrupted while waiting", cause);
    }
    return new BloomException(Status.Code.INTERNAL, String.valueOf(cause), cause);
  }

  static String describe(Status status) {
    if (status.getDescription() != null) {
      return status.getDescription();
    }
    return status.getCause() != null ? status.getCause().toString() : status.getCode().name();
  }
}
