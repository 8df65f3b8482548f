package example;

import io.bloomserver.client.BloomClient;
import io.bloomserver.client.Items;
import io.bloomserver.client.Spec;
import java.util.ArrayList;
import java.util.List;

/**
 * Guards a cache against lookups of ids that do not exist (cache penetration).
 *
 * <pre>java example.CacheGuard [HOST:PORT]   (default 127.0.0.1:50051)</pre>
 */
public final class CacheGuard {
  private CacheGuard() {}

  public static void main(String[] args) {
    String target = args.length > 0 ? args[0] : "127.0.0.1:50051";
    BloomClient.Builder builder = BloomClient.builder(target);
    if (System.getenv("BLOOM_TOKEN") != null) {
      builder.token(System.getenv("BLOOM_TOKEN"));
    }
    try (BloomClient client = builder.build()) {
      client.reserve("example:user-ids", Spec.bloom(100_000, 0.001));
      List<byte[]> ids = new ArrayList<>(); // ids that exist
      for (int id = 1000; id < 2000; id++) {
        ids.add(Items.utf8(Integer.toString(id)));
      }
      client.add("example:user-ids", ids);
      for (String id : new String[] {"1500", "424242"}) {
        if (client.mightContain("example:user-ids", id)) {
          System.out.println(id + ": may exist, look it up");
        } else {
          System.out.println(id + ": does not exist, skip the database");
        }
      }
    }
  }
}
