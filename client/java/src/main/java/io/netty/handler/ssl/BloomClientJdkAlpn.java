package io.netty.handler.ssl;

import io.netty.handler.codec.http2.Http2SecurityUtil;
import java.io.File;
import javax.net.ssl.SSLException;

/**
 * HTTP/2's ALPN ("h2") through the JDK's own TLS (Java 9+), for netty builds whose {@code
 * JdkSslContext} has no ALPN: Debian's netty 4.1.48 drops the Jetty-based negotiators, and with
 * them the JDK one, so {@code GrpcSslContexts.forClient()} fails with "JDK provider does not
 * support ALPN protocol" there. Netty's own {@code Java9SslEngine} still does ALPN with the
 * JDK; it is package-private, hence this class in netty's package. {@code
 * io.bloomserver.client.Connection} uses it only when netty's usual path fails (Maven Central's
 * netty never needs it).
 *
 * <p>Thread-safety: stateless.
 */
public final class BloomClientJdkAlpn {
  private BloomClientJdkAlpn() {}

  /**
   * A client context trusting {@code caFile} (null: the JDK's CAs) and, when {@code certFile}
   * is not null, presenting that certificate with PKCS#8 PEM key {@code keyFile}.
   */
  @SuppressWarnings("deprecation") // the only constructors that take a negotiator
  public static SslContext forClient(File caFile, File certFile, File keyFile) throws SSLException {
    JdkApplicationProtocolNegotiator h2 = new JdkBaseApplicationProtocolNegotiator(
        (engine, negotiator, isServer)
            -> new Java9SslEngine(engine, negotiator, isServer),
        JdkBaseApplicationProtocolNegotiator.FAIL_SELECTOR_FACTORY,
        JdkBaseApplicationProtocolNegotiator.FAIL_SELECTION_LISTENER_FACTORY, "h2");
    return new JdkSslClientContext(caFile, null, certFile, keyFile, null, null,
        Http2SecurityUtil.CIPHERS, SupportedCipherSuiteFilter.INSTANCE, h2, 0, 0);
  }
}
