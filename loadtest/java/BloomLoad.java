// bloom-load: the Java client under load, beside bloom-bench (loadtest/bloom_bench.cc), with the
// same workload shapes: many threads each making one single-key call at a time, MightContain and
// Add half and half (bloom-bench scenario 3), over one filter or over many per-user filters
// created on first add (scenario 5). Run with the client's class path (client/java/build.sh):
//
//   java -cp "$(cat build/java/classpath)" loadtest/java/BloomLoad.java --address=127.0.0.1:50051 \
//     --threads=200 --transport=pipelined --filters=1 --duration=10 --server_pid=$PID
//
// Every key whose add was acknowledged before a check was sent must read present (one filter):
// a false negative fails the run (exit 1). Prints one JSON object with bloom-bench's fields
// (keys/s, latency, server CPU per million keys from /proc/PID/stat). The JVM first runs the
// workload unmeasured for --warmup seconds: a long-running service's JIT has compiled its hot
// paths, a cold JVM would measure the compiler.
import io.bloomserver.client.BloomClient;
import io.bloomserver.client.BloomException;
import io.bloomserver.client.Items;
import io.bloomserver.client.Spec;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.atomic.AtomicLongArray;

public final class BloomLoad {
  public static void main(String[] args) throws Exception {
    Map<String, String> flags = new HashMap<>(Map.of("address", "127.0.0.1:50051", "threads", "200",
        "transport", "pipelined", "filters", "1", "capacity", "1000000", "error_rate", "0.01",
        "key_space", "1000000", "preload", "100000", "duration", "10", "warmup", "3"));
    flags.putAll(Map.of("server_pid", "0", "label", "", "streams", "1"));
    for (String arg : args) {
      if (!arg.startsWith("--") || !arg.contains("=")) {
        System.err.println("bloom-load: flags are --name=value, got " + arg);
        System.exit(2);
      }
      String name = arg.substring(2, arg.indexOf('='));
      if (!flags.containsKey(name)) {
        System.err.println("bloom-load: unknown flag --" + name + "; flags: " + flags.keySet());
        System.exit(2);
      }
      flags.put(name, arg.substring(arg.indexOf('=') + 1));
    }
    String transport = flags.get("transport");
    if (!transport.equals("pipelined") && !transport.equals("unary")) {
      System.err.println("bloom-load: --transport is pipelined or unary");
      System.exit(2);
    }
    int threads = Integer.parseInt(flags.get("threads"));
    int filters = Integer.parseInt(flags.get("filters"));
    int keySpace = Integer.parseInt(flags.get("key_space"));
    int preload = Math.min(keySpace, Integer.parseInt(flags.get("preload")));
    int serverPid = Integer.parseInt(flags.get("server_pid"));
    Spec spec = Spec.bloom(
        Long.parseLong(flags.get("capacity")), Double.parseDouble(flags.get("error_rate")));

    try (BloomClient client = BloomClient.builder(flags.get("address"))
                                  .pipelined(transport.equals("pipelined"))
                                  .streams(Integer.parseInt(flags.get("streams")))
                                  .build()) {
      AtomicLongArray acked = new AtomicLongArray(keySpace / 64 + 1);
      if (filters == 1) { // as bloom-bench: a fresh filter, preloaded unmeasured
        try {
          client.delete("bench-0");
        } catch (BloomException e) {
          if (e.code() != io.grpc.Status.Code.NOT_FOUND) {
            throw e;
          }
        }
        client.reserve("bench-0", spec);
        for (int first = 0; first < preload; first += 10_000) {
          List<byte[]> keys = new ArrayList<>();
          for (int id = first; id < Math.min(preload, first + 10_000); id++) {
            keys.add(Items.utf8(Integer.toString(id)));
          }
          client.add("bench-0", keys);
          for (int id = first; id < Math.min(preload, first + 10_000); id++) {
            set(acked, id);
          }
        }
      }
      Worker[] warm = run(client, spec, threads, filters, keySpace, acked,
          Long.parseLong(flags.get("warmup")) * 1000, 1);
      check(warm);
      double cpuBefore = cpuSeconds(serverPid);
      long start = System.nanoTime();
      Worker[] workers = run(client, spec, threads, filters, keySpace, acked,
          Long.parseLong(flags.get("duration")) * 1000, 2);
      double seconds = (System.nanoTime() - start) / 1e9;
      double cpu = cpuSeconds(serverPid) - cpuBefore;
      check(workers);
      long keys = 0;
      long falseNegatives = 0;
      long probes = 0;
      long falsePositives = 0;
      List<long[]> latencies = new ArrayList<>();
      for (Worker w : workers) {
        keys += w.keys;
        falseNegatives += w.falseNegatives;
        probes += w.absentProbes;
        falsePositives += w.falsePositives;
        latencies.add(Arrays.copyOf(w.latencyNanos, w.count));
      }
      long[] all = latencies.stream().flatMapToLong(Arrays::stream).sorted().toArray();
      String label = flags.get("label").isEmpty() ? "java/" + transport : flags.get("label");
      System.out.printf(
          "{\"label\":\"%s\",\"target\":\"bloom\",\"clients\":%d,\"batch\":1,\"mix\":\"both\","
              + "\"keys\":%d,\"seconds\":%.3f,\"keys_per_second\":%.0f,"
              + "\"latency_us\":{\"p50\":%.1f,\"p99\":%.1f,\"p999\":%.1f},"
              + "\"false_negatives\":%d,\"observed_fpr\":%.6f,"
              + "\"server_cpu_seconds_per_million_keys\":%.4f}%n",
          label, threads, keys, seconds, keys / seconds, percentile(all, 0.5),
          percentile(all, 0.99), percentile(all, 0.999), falseNegatives,
          probes == 0 ? 0.0 : (double) falsePositives / probes,
          keys == 0 ? 0.0 : cpu / (keys / 1e6));
      if (falseNegatives > 0) {
        System.err.println("bloom-load: " + falseNegatives + " acknowledged keys read absent");
        System.exit(1);
      }
    }
  }

  /** One thread's calls and what they found. */
  static final class Worker extends Thread {
    long keys;
    long falseNegatives;
    long absentProbes;
    long falsePositives;
    long[] latencyNanos = new long[1 << 16];
    int count;
    volatile Throwable error;
    Runnable body;

    @Override
    public void run() {
      try {
        body.run();
      } catch (Throwable e) {
        error = e;
      }
    }

    void note(long nanos) {
      if (count == latencyNanos.length) {
        latencyNanos = Arrays.copyOf(latencyNanos, count * 2);
      }
      latencyNanos[count++] = nanos;
    }
  }

  static Worker[] run(BloomClient client, Spec spec, int threads, int filters, int keySpace,
      AtomicLongArray acked, long millis, int round) throws InterruptedException {
    long deadline = System.nanoTime() + millis * 1_000_000;
    Worker[] workers = new Worker[threads];
    for (int t = 0; t < threads; t++) {
      Worker w = new Worker();
      SplittableRandom random = new SplittableRandom(t * 7919L + round);
      w.body = () -> {
        while (System.nanoTime() < deadline) {
          boolean add = random.nextBoolean();
          String filter = "bench-" + (filters == 1 ? 0 : random.nextInt(filters));
          boolean probe = !add && random.nextInt(10) == 0;
          int id = random.nextInt(keySpace);
          byte[] key = Items.utf8(probe ? "absent:" + random.nextLong() : Integer.toString(id));
          boolean mustBePresent = !add && !probe && filters == 1 && get(acked, id);
          long sent = System.nanoTime();
          boolean answer = add ? client.addOrCreate(filter, spec, List.of(key))[0]
                               : client.mightContainOrAbsent(filter, List.of(key))[0];
          w.note(System.nanoTime() - sent);
          w.keys++;
          if (add) {
            if (filters == 1) {
              set(acked, id);
            }
          } else if (probe) {
            w.absentProbes++;
            w.falsePositives += answer ? 1 : 0;
          } else if (mustBePresent && !answer) {
            w.falseNegatives++;
          }
        }
      };
      workers[t] = w;
      w.start();
    }
    for (Worker w : workers) {
      w.join();
    }
    return workers;
  }

  static void check(Worker[] workers) {
    for (Worker w : workers) {
      if (w.error != null) {
        System.err.println("bloom-load: a call failed: " + w.error);
        System.exit(1);
      }
    }
  }

  static void set(AtomicLongArray bits, int id) {
    bits.getAndUpdate(id / 64, word -> word | (1L << (id % 64)));
  }

  static boolean get(AtomicLongArray bits, int id) {
    return (bits.get(id / 64) & (1L << (id % 64))) != 0;
  }

  static double percentile(long[] sorted, double p) {
    if (sorted.length == 0) {
      return 0;
    }
    return sorted[(int) Math.min(sorted.length - 1, Math.floor(p * sorted.length))] / 1000.0;
  }

  /** The server's CPU seconds so far (utime + stime of /proc/PID/stat); 0 without a pid. */
  static double cpuSeconds(int pid) throws Exception {
    if (pid <= 0) {
      return 0;
    }
    String stat = Files.readString(Path.of("/proc/" + pid + "/stat"));
    String[] fields = stat.substring(stat.lastIndexOf(')') + 2).split(" ");
    // Fields 14 and 15 of the line (utime, stime), counted from after the command's ")".
    return (Long.parseLong(fields[11]) + Long.parseLong(fields[12])) / 100.0;
  }
}
