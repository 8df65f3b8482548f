package io.bloomserver.client;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;

/**
 * Items are bytes: the string {@code "a"} and the bytes {@code {0x61}} are the same item, in
 * every client language (C++, Python, Go, Node.js and Java), so filters can be shared.
 * Strings become their UTF-8 bytes.
 *
 * <p>Thread-safety: stateless.
 */
public final class Items {
  private Items() {}

  /** One string's item: its UTF-8 bytes. */
  public static byte[] utf8(String item) {
    return item.getBytes(StandardCharsets.UTF_8);
  }

  /** Strings' items, in order. */
  public static List<byte[]> of(String... items) {
    List<byte[]> out = new ArrayList<>(items.length);
    for (String item : items) {
      out.add(utf8(item));
    }
    return out;
  }

  /** A collection of strings' items, in iteration order. */
  public static List<byte[]> ofStrings(Collection<String> items) {
    List<byte[]> out = new ArrayList<>(items.size());
    for (String item : items) {
      out.add(utf8(item));
    }
    return out;
  }
}
