// An immutable string in 24 bytes that holds up to 23 bytes inline: for names kept by the
// million (one per per-user filter), where std::string takes 32 bytes and holds only 15 inline,
// so a name like "seen:user:1234567890" cost 32 bytes more on the heap.
//
//   ShortString name("user:42");
//   absl::string_view view = name.view();  // valid while `name` lives
//
// Longer strings are copied to the heap once. Move-only: moving leaves the source empty.
//
// Thread-safety: immutable after construction; any number of threads may read it.
#ifndef COMMON_SHORT_STRING_H_
#define COMMON_SHORT_STRING_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "absl/strings/string_view.h"

class ShortString {
 public:
  static constexpr size_t kMaxInline = 23;

  ShortString() { Clear(); }
  explicit ShortString(absl::string_view text) {
    if (text.size() <= kMaxInline) {
      std::memcpy(bytes_, text.data(), text.size());
      bytes_[kTagByte] = static_cast<char>(text.size());
    } else {
      char* data = new char[text.size()];
      std::memcpy(data, text.data(), text.size());
      const uint64_t size = text.size();
      std::memcpy(bytes_, &data, sizeof(data));
      std::memcpy(bytes_ + sizeof(data), &size, sizeof(size));
      bytes_[kTagByte] = kHeapTag;
    }
  }
  ShortString(ShortString&& other) noexcept {
    std::memcpy(bytes_, other.bytes_, sizeof(bytes_));
    other.Clear();
  }
  ShortString& operator=(ShortString&& other) noexcept {
    if (this != &other) {
      Free();
      std::memcpy(bytes_, other.bytes_, sizeof(bytes_));
      other.Clear();
    }
    return *this;
  }
  ShortString(const ShortString&) = delete;
  ShortString& operator=(const ShortString&) = delete;
  ~ShortString() { Free(); }

  absl::string_view view() const {
    if (!on_heap()) return {bytes_, static_cast<size_t>(bytes_[kTagByte])};
    return {HeapData(), HeapSize()};
  }
  operator absl::string_view() const { return view(); }  // NOLINT: a string, as std::string
  std::string str() const { return static_cast<std::string>(view()); }
  size_t size() const { return view().size(); }
  // Whether the text lives on the heap (longer than kMaxInline).
  bool on_heap() const { return bytes_[kTagByte] == kHeapTag; }

 private:
  static constexpr size_t kTagByte = kMaxInline;  // inline: the size; else kHeapTag
  static constexpr char kHeapTag = static_cast<char>(0xff);

  char* HeapData() const {
    char* data;
    std::memcpy(&data, bytes_, sizeof(data));
    return data;
  }
  uint64_t HeapSize() const {
    uint64_t size;
    std::memcpy(&size, bytes_ + sizeof(char*), sizeof(size));
    return size;
  }
  void Free() {
    if (on_heap()) delete[] HeapData();
  }
  void Clear() { bytes_[kTagByte] = 0; }

  // Inline: the text, then its size in the last byte. On the heap: the pointer, the size, and
  // kHeapTag in the last byte.
  char bytes_[kMaxInline + 1];
};

static_assert(sizeof(ShortString) == 24, "ShortString is 24 bytes");

#endif  // COMMON_SHORT_STRING_H_
