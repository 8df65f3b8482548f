package io.bloomserver.client;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.grpc.Status;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * A server restarted on the same address after calls failed while it was down: the client is
 * back within a few hundred milliseconds of it, unary and pipelined. With grpc-java's own
 * backoff (1 s, growing 1.6x per failed attempt) the next attempt after three seconds down
 * comes up to 2.6 s after the server is back; the client resets that backoff while it polls.
 */
class ReconnectTest {
  @ParameterizedTest
  @ValueSource(booleans = {false, true})
  void aClientIsBackSoonAfterTheServer(boolean pipelined) throws Exception {
    try (TestServer server = new TestServer();
         BloomClient client = BloomClient.builder(server.target())
                                  .pipelined(pipelined)
                                  .timeout(Duration.ofSeconds(2))
                                  .build()) {
      client.addOrCreate("f", Spec.bloom(1000, 0.01), Items.of("before"));
      for (int restart = 0; restart < 2; restart++) {
        server.kill();
        long downUntil = System.nanoTime() + TimeUnit.SECONDS.toNanos(3);
        while (System.nanoTime() < downUntil) { // failed attempts grow gRPC's backoff
          assertEquals(Status.Code.UNAVAILABLE,
              assertThrows(BloomException.class, () -> client.mightContain("f", "before")).code());
          TestServer.sleep(200);
        }
        server.restart();
        long back = System.nanoTime();
        boolean[] answer = null;
        while (answer == null && System.nanoTime() - back < TimeUnit.SECONDS.toNanos(10)) {
          try {
            answer = client.mightContain("f", Items.of("before", "never"));
          } catch (BloomException e) {
            assertEquals(Status.Code.UNAVAILABLE, e.code(), e.getMessage());
            TestServer.sleep(20);
          }
        }
        long millis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - back);
        assertArrayEquals(new boolean[] {true, false}, answer, "restart " + restart);
        assertTrue(millis < 1000, "answered " + millis + " ms after the server was back");
      }
    }
  }
}
