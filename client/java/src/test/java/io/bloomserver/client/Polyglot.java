package io.bloomserver.client;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;

/**
 * The Java side of tests/polyglot_test.cc and tests/replication_test.cc, where every client
 * language adds and checks the same items in one filter and must agree on every answer. Its
 * arguments and output are those of client/go/polyglot:
 *
 * <pre>
 * Polyglot TARGET FILTER add|add-pipelined|check|check-pipelined &lt; ITEMS
 * Polyglot WRITER,READER FILTER read-your-writes[-pipelined] &lt; ITEMS
 * Polyglot TARGET FILTER cuckoo-add|remove|count &lt; ITEMS
 * </pre>
 *
 * ITEMS is one hex-encoded item per line. Prints one line per item: 1 (added / present) or 0,
 * or a count. In the -pipelined modes every item is its own concurrent call (coalesced). Exit 1
 * with the status on stderr on an error.
 */
public final class Polyglot {
  private static final Spec SPEC = Spec.bloom(10_000, 0.001);

  private Polyglot() {}

  public static void main(String[] args) throws Exception {
    if (args.length != 3) {
      System.err.println("usage: Polyglot TARGET FILTER MODE < ITEMS");
      System.exit(2);
    }
    String target = args[0];
    String filter = args[1];
    String mode = args[2];
    List<byte[]> items = new ArrayList<>();
    BufferedReader in =
        new BufferedReader(new InputStreamReader(System.in, StandardCharsets.US_ASCII));
    for (String line = in.readLine(); line != null; line = in.readLine()) {
      items.add(unhex(line.trim()));
    }
    PrintStream out = new PrintStream(System.out, false, "US-ASCII");
    try {
      boolean pipelined = mode.endsWith("-pipelined");
      if (mode.startsWith("read-your-writes")) {
        readYourWrites(target.split(","), filter, items, pipelined, out);
      } else {
        try (BloomClient client = BloomClient.builder(target).pipelined(pipelined).build()) {
          run(client, filter, mode, items, pipelined, out);
        }
      }
    } catch (BloomException e) {
      System.err.println(e.getMessage());
      System.exit(1);
    }
    out.flush();
    System.exit(0);
  }

  private static void run(BloomClient client, String filter, String mode, List<byte[]> items,
      boolean pipelined, PrintStream out) {
    switch (mode) {
      case "cuckoo-add":
        print(client.addOrCreate(filter, Spec.cuckoo(10_000, 0.001), items), out);
        return;
      case "remove":
        print(client.remove(filter, items), out);
        return;
      case "count":
        for (int count : client.count(filter, items)) {
          out.println(count);
        }
        return;
      default:
        break;
    }
    boolean add = mode.startsWith("add");
    if (!pipelined) {
      print(
          add ? client.addOrCreate(filter, SPEC, items) : client.mightContain(filter, items), out);
      return;
    }
    List<CompletableFuture<boolean[]>> calls = new ArrayList<>();
    for (byte[] item : items) { // every item its own concurrent call
      calls.add(add ? client.addOrCreateAsync(filter, SPEC, List.of(item))
                    : client.mightContainAsync(filter, List.of(item)));
    }
    boolean[] answers = new boolean[items.size()];
    for (int i = 0; i < answers.length; i++) {
      answers[i] = BloomClient.await(calls.get(i))[0];
    }
    print(answers, out);
  }

  private static void readYourWrites(
      String[] pods, String filter, List<byte[]> items, boolean pipelined, PrintStream out) {
    try (BloomClient writer = BloomClient.builder(pods[0]).pipelined(pipelined).build();
         BloomClient reader = BloomClient.builder(pods[1]).pipelined(pipelined).build()) {
      for (byte[] item : items) {
        writer.addOrCreate(filter, SPEC, List.of(item));
        reader.observeSequence(writer.lastSequence());
        out.println(reader.mightContain(filter, item) ? "1" : "0");
      }
    }
  }

  private static void print(boolean[] answers, PrintStream out) {
    for (boolean answer : answers) {
      out.println(answer ? "1" : "0");
    }
  }

  private static byte[] unhex(String hex) {
    if (hex.length() % 2 != 0) {
      System.err.println("bad hex item: " + hex);
      System.exit(2);
    }
    byte[] out = new byte[hex.length() / 2];
    for (int i = 0; i < out.length; i++) {
      out[i] = (byte) Integer.parseInt(hex.substring(2 * i, 2 * i + 2), 16);
    }
    return out;
  }
}
