package io.bloomserver.client;

import com.google.common.hash.Funnel;
import com.google.common.hash.PrimitiveSink;
import java.nio.ByteBuffer;
import java.nio.charset.Charset;
import java.util.Arrays;

/**
 * A Guava {@link PrimitiveSink} that keeps what a {@code Funnel} writes: the item's bytes.
 * Numbers are written little-endian and {@code putUnencodedChars} as UTF-16LE code units, as
 * Guava's hashers read them, so a Funnel means the same bytes here as in a Guava BloomFilter.
 *
 * <p>Thread-safety: not thread-safe; one per item.
 */
final class ItemSink implements PrimitiveSink {
  private byte[] bytes = new byte[32];
  private int size;

  /** The bytes {@code funnel} writes for {@code item}. */
  static <T> byte[] bytesOf(Funnel<? super T> funnel, T item) {
    ItemSink sink = new ItemSink();
    funnel.funnel(item, sink);
    return sink.toByteArray();
  }

  byte[] toByteArray() {
    return Arrays.copyOf(bytes, size);
  }

  private void reserve(int more) {
    if (size + more > bytes.length) {
      bytes = Arrays.copyOf(bytes, Math.max(bytes.length * 2, size + more));
    }
  }

  private ItemSink putLittleEndian(long value, int width) {
    reserve(width);
    for (int i = 0; i < width; i++) {
      bytes[size++] = (byte) (value >>> (8 * i));
    }
    return this;
  }

  @Override
  public ItemSink putByte(byte b) {
    reserve(1);
    bytes[size++] = b;
    return this;
  }

  @Override
  public ItemSink putBytes(byte[] b) {
    return putBytes(b, 0, b.length);
  }

  @Override
  public ItemSink putBytes(byte[] b, int off, int len) {
    reserve(len);
    System.arraycopy(b, off, bytes, size, len);
    size += len;
    return this;
  }

  @Override
  public ItemSink putBytes(ByteBuffer b) {
    int len = b.remaining();
    reserve(len);
    b.get(bytes, size, len);
    size += len;
    return this;
  }

  @Override
  public ItemSink putShort(short s) {
    return putLittleEndian(s, 2);
  }

  @Override
  public ItemSink putInt(int i) {
    return putLittleEndian(i, 4);
  }

  @Override
  public ItemSink putLong(long l) {
    return putLittleEndian(l, 8);
  }

  @Override
  public ItemSink putFloat(float f) {
    return putInt(Float.floatToRawIntBits(f));
  }

  @Override
  public ItemSink putDouble(double d) {
    return putLong(Double.doubleToRawLongBits(d));
  }

  @Override
  public ItemSink putBoolean(boolean b) {
    return putByte(b ? (byte) 1 : (byte) 0);
  }

  @Override
  public ItemSink putChar(char c) {
    return putLittleEndian(c, 2);
  }

  @Override
  public ItemSink putUnencodedChars(CharSequence chars) {
    for (int i = 0; i < chars.length(); i++) {
      putChar(chars.charAt(i));
    }
    return this;
  }

  /**
   * Debian's Guava keeps the old {@code putString(CharSequence)} (Maven Central's 31.1 dropped
   * it): the chars unencoded, as it meant. No @Override, so this builds against either.
   */
  @Deprecated
  public ItemSink putString(CharSequence chars) {
    return putUnencodedChars(chars);
  }

  @Override
  public ItemSink putString(CharSequence chars, Charset charset) {
    return putBytes(chars.toString().getBytes(charset));
  }
}
