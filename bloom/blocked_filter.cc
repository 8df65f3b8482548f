#include "bloom/blocked_filter.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>

#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "bloom/hash.h"
#include "bloom/mapped_bits.h"
#include "bloom/slice_arena.h"
#include "common/slab.h"

namespace bloom {
namespace {

static_assert(std::endian::native == std::endian::little,
              "pages are persisted as little-endian words");

// Filters of at least this many bytes are mmap'ed (zero pages are free until touched) and
// asked for transparent huge pages, which cut TLB misses on random access to large filters.
constexpr uint64_t kMmapThreshold = 2 << 20;

// Words are only ever accessed through atomic_ref (words() is a pointer to non-const even in
// const methods, so reads need no cast).
inline uint64_t LoadWord(uint64_t& word) {
  return std::atomic_ref<uint64_t>(word).load(std::memory_order_acquire);
}

// The masks of the item's k bits in the 8 words of its block: 9-bit positions taken from a
// mixed stream of the hash, 7 per 64-bit draw. (Multiply-shift by k fixed constants of one
// 32-bit key, as split-block filters do, correlates the positions enough to measure 0.4% more
// false positives than the model at 1%; independent positions match it.)
inline void BitMasks(uint64_t hash, uint32_t k, uint64_t (&masks)[kBlockWords]) {
  uint64_t stream = Mix(hash);
  for (uint32_t i = 0; i < k; ++i) {
    // Each 64-bit draw mixes the hash with its own counter (never the used-up stream).
    if (i != 0 && i % 7 == 0) stream = Mix(hash + (i / 7) * 0x9e3779b97f4a7c15ULL);
    const auto bit = static_cast<uint32_t>(stream & (kBlockBits - 1));
    stream >>= 9;
    masks[bit >> 6] |= uint64_t{1} << (bit & 63);
  }
}

// Set bits of a word. std::popcount compiles to a call into libgcc's table-driven routine when
// the build targets baseline x86-64 (no POPCNT instruction), as Debian's does: 5% of a windowed
// add's time. This bit-slicing count (Hacker's Delight 5-2) is a dozen inline instructions.
inline uint32_t CountBits(uint64_t x) {
  x = x - ((x >> 1) & 0x5555555555555555ULL);
  x = (x & 0x3333333333333333ULL) + ((x >> 2) & 0x3333333333333333ULL);
  x = (x + (x >> 4)) & 0x0f0f0f0f0f0f0f0fULL;
  return static_cast<uint32_t>((x * 0x0101010101010101ULL) >> 56);
}

inline uint64_t CeilDiv(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

// 64-bit words of dirty-page bits for a filter of `bytes` bytes of bits.
inline uint64_t DirtyWords(uint64_t bytes) {
  return CeilDiv(CeilDiv(bytes, BlockedBloomFilter::kPageBytes), 64);
}

constexpr uint64_t kLineBytes = 64;

}  // namespace

absl::StatusOr<std::unique_ptr<BlockedBloomFilter>> BlockedBloomFilter::Create(
    BlockedLayout layout, size_t companion_bytes) {
  if (layout.num_blocks == 0 || layout.num_blocks > kMaxBlocks || layout.hash_count == 0 ||
      layout.hash_count > kMaxHashCount) {
    return absl::InvalidArgumentError(absl::StrCat("invalid layout: ", layout.num_blocks,
                                                   " blocks, ", layout.hash_count, " hashes"));
  }
  if (companion_bytes % sizeof(uint64_t) != 0 || companion_bytes > kMaxCompanionBytes) {
    return absl::InvalidArgumentError(absl::StrCat("a companion of ", companion_bytes,
                                                   " bytes; at most ", kMaxCompanionBytes,
                                                   " in multiples of 8"));
  }
  const uint64_t bytes = layout.bytes();
  if (bytes >= kMmapThreshold) {
    void* words = MapBits(bytes);
    void* object =
        words == nullptr ? nullptr : std::malloc(sizeof(BlockedBloomFilter) + sizeof(Far));
    if (object == nullptr) {
      UnmapBits(words, bytes);
      return absl::ResourceExhaustedError(
          absl::StrCat("cannot allocate ", bytes, " bytes for filter bits"));
    }
    auto* filter = new (object) BlockedBloomFilter(layout, Storage::kMapped);
    new (filter + 1)
        Far{static_cast<uint64_t*>(words), new uint64_t[DirtyWords(bytes)](), nullptr, kBlockWords};
    return std::unique_ptr<BlockedBloomFilter>(filter);
  }
  // A small filter is one allocation: its owner's companion, this object, then its bits
  // (64-byte aligned), then its dirty-page bits unless they fit in the object. A server may
  // hold millions of small filters; each allocation less saves its header and rounding (about
  // 64 bytes). Up to slab::kMaxSlotBytes it is a slab slot: a cache that evicts and loads small
  // filters all day reuses their slots exactly, where malloc would fragment (common/slab.h). A
  // filter of capacity 1000 at 1% (1,472 bytes of bits) with its sub-filter takes 1,536 bytes,
  // a whole number of slots.
  const bool dirty_inline = DirtyWords(bytes) == 1;
  const uint64_t header =
      CeilDiv(sizeof(BlockedBloomFilter) + companion_bytes, kLineBytes) * kLineBytes;
  const uint64_t total = header + bytes + (dirty_inline ? 0 : DirtyWords(bytes) * sizeof(uint64_t));
  const Storage storage = slab::Fits(total) ? Storage::kSlab : Storage::kHeap;
  void* memory = nullptr;
  if (storage == Storage::kSlab) {
    memory = slab::Allocate(total);
  } else if (posix_memalign(&memory, kBlockBytes, total) != 0) {
    memory = nullptr;
  }
  if (memory == nullptr) {
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot allocate ", bytes, " bytes for filter bits"));
  }
  char* const words = static_cast<char*>(memory) + header;
  std::memset(words, 0, total - header);
  return std::unique_ptr<BlockedBloomFilter>(
      new (words - sizeof(BlockedBloomFilter))
          BlockedBloomFilter(layout, storage, static_cast<uint32_t>(header / kLineBytes),
                             static_cast<uint32_t>(companion_bytes)));
}

std::unique_ptr<BlockedBloomFilter> BlockedBloomFilter::CreateInArena(SliceArena& arena) {
  void* object = std::malloc(sizeof(BlockedBloomFilter) + sizeof(Far));
  if (object == nullptr) return nullptr;
  uint64_t* words = arena.AcquireSlot();
  if (words == nullptr) {
    std::free(object);
    return nullptr;
  }
  const BlockedLayout layout = arena.layout();
  auto* filter = new (object) BlockedBloomFilter(layout, Storage::kArena);
  new (filter + 1)
      Far{words, new uint64_t[DirtyWords(layout.bytes())](), &arena, arena.stride_words()};
  return std::unique_ptr<BlockedBloomFilter>(filter);
}

BlockedBloomFilter::BlockedBloomFilter(BlockedLayout layout, Storage storage, uint32_t header_lines,
                                       uint32_t companion_bytes)
    : num_blocks_minus_one_(static_cast<uint32_t>(layout.num_blocks - 1)),
      hash_count_(static_cast<uint8_t>(layout.hash_count)),
      storage_(storage),
      header_lines_(static_cast<uint8_t>(header_lines)),
      companion_bytes_(static_cast<uint8_t>(companion_bytes)) {}

BlockedBloomFilter::BlockedBloomFilter(BlockedLayout layout, Storage storage)
    : BlockedBloomFilter(layout, storage, 0, 0) {}

BlockedBloomFilter::~BlockedBloomFilter() {
  if (storage_ == Storage::kMapped) {
    UnmapBits(far()->words, layout().bytes());
    delete[] far()->dirty;
  } else if (storage_ == Storage::kArena) {
    far()->arena->ReleaseSlot(far()->words);
    delete[] far()->dirty;
  }  // else the bits share this object's allocation, which operator delete frees
}

void BlockedBloomFilter::Destroy(BlockedBloomFilter* filter) {
  // Read before the object ends.
  const Storage storage = filter->storage_;
  void* const allocation = filter->bits_follow() ? reinterpret_cast<char*>(filter->words()) -
                                                       uint64_t{filter->header_lines_} * kLineBytes
                                                 : static_cast<void*>(filter);
  filter->~BlockedBloomFilter();
  if (storage == Storage::kSlab) {
    slab::Free(allocation);
  } else {
    std::free(allocation);
  }
}

uint64_t* BlockedBloomFilter::dirty() const {
  if (!bits_follow()) return far()->dirty;
  if (num_blocks() <= uint64_t{64} * kBlocksPerPage) return &inline_dirty_;
  return words() + layout().bytes() / sizeof(uint64_t);
}

static_assert(sizeof(BlockedBloomFilter) == 24,
              "a small filter's header line holds its sub-filter");

uint32_t BlockedBloomFilter::AddToBlock(uint64_t* block, uint64_t block_index, uint64_t hash) {
  uint64_t masks[kBlockWords] = {};
  BitMasks(hash, hash_count_, masks);
  // First find which words lack bits, without branches per word (they mispredict) and without
  // locked instructions (an item already present, the common case in a filled filter, then
  // costs no more than a query).
  uint32_t words_to_set = 0;
  for (uint32_t w = 0; w < kBlockWords; ++w) {
    const uint64_t missing = masks[w] & ~LoadWord(block[w]);
    masks[w] = missing;
    words_to_set |= static_cast<uint32_t>(missing != 0) << w;
  }
  if (words_to_set == 0) return 0;
  uint32_t newly_set = 0;
  for (; words_to_set != 0; words_to_set &= words_to_set - 1) {
    const int w = std::countr_zero(words_to_set);
    const uint64_t before =
        std::atomic_ref<uint64_t>(block[w]).fetch_or(masks[w], std::memory_order_acq_rel);
    newly_set += CountBits(masks[w] & ~before);
  }
  MarkPageDirty(block_index / kBlocksPerPage);
  return newly_set;
}

bool BlockedBloomFilter::Add(uint64_t hash) {
  const uint64_t block_index = BlockIndex(hash);
  const uint32_t newly_set = AddToBlock(words() + block_index * stride_words(), block_index, hash);
  if (newly_set != 0) set_bits_.fetch_add(newly_set, std::memory_order_relaxed);
  return newly_set != 0;
}

void BlockedBloomFilter::AddManyTo(absl::Span<const uint64_t> hashes, uint64_t* words) const {
  for (uint64_t hash : hashes) {
    uint64_t masks[kBlockWords] = {};
    BitMasks(hash, hash_count_, masks);
    uint64_t* block = words + BlockIndex(hash) * kBlockWords;
    for (uint32_t w = 0; w < kBlockWords; ++w) block[w] |= masks[w];
  }
}

bool BlockedBloomFilter::MightContain(uint64_t hash) const {
  uint64_t* block = BlockFor(hash);
  uint64_t masks[kBlockWords] = {};
  BitMasks(hash, hash_count_, masks);
  uint64_t missing = 0;  // branch-free: all 8 words are in one cache line anyway
  for (uint32_t w = 0; w < kBlockWords; ++w) missing |= masks[w] & ~LoadWord(block[w]);
  return missing == 0;
}

// How many items ahead to prefetch: enough to cover a DRAM miss with the work of the items in
// between (measured with benchmarks/filter_benchmark: 8-20 are alike for adds, 4 is slower).
constexpr size_t kPrefetchDistance = 12;

void BlockedBloomFilter::AddMany(absl::Span<const uint64_t> hashes) {
  const size_t n = hashes.size();
  uint64_t* const base = words();
  const uint64_t stride = stride_words();
  uint64_t newly_set = 0;  // one shared counter update per batch, not per item
  for (size_t i = 0; i < n; ++i) {
    if (i + kPrefetchDistance < n) {
      __builtin_prefetch(base + BlockIndex(hashes[i + kPrefetchDistance]) * stride, /*rw=*/1);
    }
    const uint64_t block_index = BlockIndex(hashes[i]);
    newly_set += AddToBlock(base + block_index * stride, block_index, hashes[i]);
  }
  if (newly_set != 0) set_bits_.fetch_add(newly_set, std::memory_order_relaxed);
}

namespace {

// How many items ahead to fetch each item's line in every filter asked. One filter (a plain
// filter or one sub-filter): 16, since a block of a filter past the caches takes longer to come
// than 8 items take to test (filter_benchmark BM_BlockedContains at 10M and 100M items; in
// cache, at 1M, the distance does not matter). Several (a window's slices): 8, since each item
// already fetches a line per slice (window_benchmark BM_Contains finds 2 to 8 alike).
constexpr size_t kAnyAheadOne = 16;
constexpr size_t kAnyAheadMany = 8;

using Probed = BlockedBloomFilter::Probes;

inline uint64_t BlockOf(uint64_t hash, uint64_t num_blocks) {
  return ((hash >> 32) * num_blocks) >> 32;
}

// For each i with answer[i] == 0, sets answer[i] = 1 + the index of the first filter that might
// contain hashes[i] (for bool answers: true). One word at a time: two words first, since an
// absent item usually misses a bit there already.
template <typename Answer>
void AnyScalar(const Probed& probed, BlockedLayout layout, absl::Span<const uint64_t> hashes,
               Answer* present) {
  const size_t n = hashes.size();
  const size_t count = probed.base.size();
  uint64_t* const* const base = probed.base.data();
  const uint64_t* const stride = probed.stride.data();
  const size_t distance = count > 1 ? kAnyAheadMany : kAnyAheadOne;
  for (size_t i = 0; i < n; ++i) {
    if (i + distance < n && !present[i + distance]) {
      const uint64_t ahead = BlockOf(hashes[i + distance], layout.num_blocks);
      for (size_t f = 0; f < count; ++f) {
        __builtin_prefetch(base[f] + ahead * stride[f]);
      }
    }
    if (present[i]) continue;
    uint64_t masks[kBlockWords] = {};
    BitMasks(hashes[i], layout.hash_count, masks);
    const uint64_t block_index = BlockOf(hashes[i], layout.num_blocks);
    for (size_t f = 0; f < count; ++f) {
      uint64_t* block = base[f] + block_index * stride[f];
      uint64_t missing = 0;
      for (uint32_t w = 0; w < 2; ++w) missing |= masks[w] & ~LoadWord(block[w]);
      if (missing != 0) continue;
      for (uint32_t w = 2; w < kBlockWords; ++w) missing |= masks[w] & ~LoadWord(block[w]);
      if (missing == 0) {
        present[i] = static_cast<Answer>(f + 1);
        break;
      }
    }
  }
}

// ThreadSanitizer: GCC defines __SANITIZE_THREAD__, clang answers __has_feature.
#if defined(__SANITIZE_THREAD__)
#define BLOOM_THREAD_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define BLOOM_THREAD_SANITIZER 1
#endif
#endif

#if defined(__x86_64__) && !defined(BLOOM_THREAD_SANITIZER)
#define BLOOM_HAVE_AVX2_PATH 1
// The same with AVX2: a block is two 256-bit loads, an and-not and one test, without the
// scalar test's branch on the first two words, which mispredicts about one slice in five
// (window_benchmark BM_Contains, 8 slices, in cache, shows the difference). The vector
// loads are not atomic while adds OR bits in: harmless, since bits only go from 0 to 1, so a
// torn read shows each bit either before or after an add, as the atomic word loads do. (Built
// out under ThreadSanitizer, which would report them.) Its prefetch and skip lines repeat
// AnyScalar's on purpose: a shared helper for them made the query about twice as slow
// (10M items, 8 slices).
template <typename Answer>
__attribute__((target("avx2"))) void AnyAvx2(const Probed& probed, BlockedLayout layout,
                                             absl::Span<const uint64_t> hashes, Answer* present) {
  const size_t n = hashes.size();
  const size_t count = probed.base.size();
  uint64_t* const* const base = probed.base.data();
  const uint64_t* const stride = probed.stride.data();
  const size_t distance = count > 1 ? kAnyAheadMany : kAnyAheadOne;
  for (size_t i = 0; i < n; ++i) {
    if (i + distance < n && !present[i + distance]) {
      const uint64_t ahead = BlockOf(hashes[i + distance], layout.num_blocks);
      for (size_t f = 0; f < count; ++f) {
        __builtin_prefetch(base[f] + ahead * stride[f]);
      }
    }
    if (present[i]) continue;
    alignas(32) uint64_t masks[kBlockWords] = {};
    BitMasks(hashes[i], layout.hash_count, masks);
    const __m256i low = _mm256_load_si256(reinterpret_cast<const __m256i*>(masks));
    const __m256i high = _mm256_load_si256(reinterpret_cast<const __m256i*>(masks + 4));
    const uint64_t block_index = BlockOf(hashes[i], layout.num_blocks);
    for (size_t f = 0; f < count; ++f) {
      const auto* block = reinterpret_cast<const __m256i*>(base[f] + block_index * stride[f]);
      const __m256i missing =
          _mm256_or_si256(_mm256_andnot_si256(_mm256_load_si256(block), low),
                          _mm256_andnot_si256(_mm256_load_si256(block + 1), high));
      if (_mm256_testz_si256(missing, missing)) {
        present[i] = static_cast<Answer>(f + 1);
        break;
      }
    }
  }
}

bool HasAvx2() {
  static const bool has = __builtin_cpu_supports("avx2");
  return has;
}
#endif

template <typename Answer>
void AskAll(const Probed& probed, BlockedLayout layout, absl::Span<const uint64_t> hashes,
            Answer* answers) {
#ifdef BLOOM_HAVE_AVX2_PATH
  if (HasAvx2()) return AnyAvx2(probed, layout, hashes, answers);
#endif
  AnyScalar(probed, layout, hashes, answers);
}

}  // namespace

BlockedBloomFilter::Probes BlockedBloomFilter::ProbesOf(
    absl::Span<const BlockedBloomFilter* const> filters) {
  Probes probes;
  for (const BlockedBloomFilter* f : filters) {
    probes.base.push_back(f->words());
    probes.stride.push_back(f->stride_words());
  }
  return probes;
}

void BlockedBloomFilter::MightContainAny(absl::Span<const BlockedBloomFilter* const> filters,
                                         absl::Span<const uint64_t> hashes, bool* present) {
  if (filters.empty()) return;
  AskAll(ProbesOf(filters), filters[0]->layout(), hashes, present);
}

void BlockedBloomFilter::FirstContaining(absl::Span<const BlockedBloomFilter* const> filters,
                                         absl::Span<const uint64_t> hashes, uint8_t* first) {
  if (filters.empty()) return;
  AskAll(ProbesOf(filters), filters[0]->layout(), hashes, first);
}

void BlockedBloomFilter::MightContainMany(absl::Span<const uint64_t> hashes, bool* present) const {
#ifdef BLOOM_HAVE_AVX2_PATH
  if (HasAvx2()) {  // AnyAvx2's test of a block is a quarter faster than MightContain's words
    const BlockedBloomFilter* self = this;
    return AnyAvx2(ProbesOf({&self, 1}), layout(), hashes, present);
  }
#endif
  const size_t n = hashes.size();
  for (size_t i = 0; i < n; ++i) {
    // Items an earlier sub-filter (or slice) found need no fetch here.
    if (i + kPrefetchDistance < n && !present[i + kPrefetchDistance]) {
      __builtin_prefetch(BlockFor(hashes[i + kPrefetchDistance]));
    }
    if (!present[i]) present[i] = MightContain(hashes[i]);
  }
}

uint64_t BlockedBloomFilter::num_pages() const { return CeilDiv(layout().bytes(), kPageBytes); }

uint64_t BlockedBloomFilter::page_size(uint64_t page) const {
  const uint64_t begin = page * kPageBytes;
  return std::min<uint64_t>(kPageBytes, layout().bytes() - begin);
}

void BlockedBloomFilter::ReadPage(uint64_t page, char* out) const {
  const uint64_t first = page * (kPageBytes / 8);
  const uint64_t words = page_size(page) / 8;
  for (uint64_t i = 0; i < words; ++i) {
    const uint64_t value = LoadWord(*WordAt(first + i));
    std::memcpy(out + i * 8, &value, 8);
  }
}

absl::Status BlockedBloomFilter::OrPage(uint64_t page, absl::string_view bytes) {
  if (page >= num_pages() || bytes.size() != page_size(page)) {
    return absl::InvalidArgumentError(absl::StrCat("page ", page, " of ", bytes.size(),
                                                   " bytes does not fit a filter of ", num_pages(),
                                                   " pages"));
  }
  const uint64_t first = page * (kPageBytes / 8);
  uint64_t newly_set = 0;
  for (uint64_t i = 0; i < bytes.size() / 8; ++i) {
    uint64_t value;
    std::memcpy(&value, bytes.data() + i * 8, 8);
    if (value == 0) continue;
    const uint64_t before =
        std::atomic_ref<uint64_t>(*WordAt(first + i)).fetch_or(value, std::memory_order_relaxed);
    newly_set += CountBits(value & ~before);
  }
  if (newly_set != 0) set_bits_.fetch_add(newly_set, std::memory_order_relaxed);
  return absl::OkStatus();
}

std::vector<uint64_t> BlockedBloomFilter::TakeDirtyPages() {
  std::vector<uint64_t> pages;
  const uint64_t dirty_words = CeilDiv(num_pages(), 64);
  for (uint64_t w = 0; w < dirty_words; ++w) {
    std::atomic_ref<uint64_t> word(dirty()[w]);
    if (word.load(std::memory_order_relaxed) == 0) continue;
    for (uint64_t bits = word.exchange(0, std::memory_order_acq_rel); bits != 0; bits &= bits - 1) {
      pages.push_back(w * 64 + std::countr_zero(bits));
    }
  }
  return pages;
}

void BlockedBloomFilter::MarkPageDirty(uint64_t page) {
  std::atomic_ref<uint64_t> word(dirty()[page / 64]);
  const uint64_t bit = uint64_t{1} << (page % 64);
  if ((word.load(std::memory_order_relaxed) & bit) == 0) {
    word.fetch_or(bit, std::memory_order_acq_rel);
  }
}

void BlockedBloomFilter::MarkAllPagesDirty() {
  for (uint64_t page = 0; page < num_pages(); ++page) MarkPageDirty(page);
}

uint64_t BlockedBloomFilter::CountSetBits() const {
  uint64_t total = 0;
  const uint64_t words = layout().bytes() / 8;
  for (uint64_t i = 0; i < words; ++i) total += CountBits(LoadWord(*WordAt(i)));
  return total;
}

double BlockedBloomFilter::EstimatedFalsePositiveRate() const {
  if (set_bits() == 0) return 0;
  const BlockedLayout shape = layout();
  if (set_bits() >= shape.bits()) return 1;
  const double items = EstimateCardinality(set_bits(), shape);
  return BlockedFalsePositiveRate(items / static_cast<double>(shape.num_blocks), hash_count_);
}

}  // namespace bloom
