#include "bloom/sizing.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/mutex.h"

namespace bloom {
namespace {

// The range of block loads j that carries the Poisson(lambda) mass (tails below ~1e-30).
struct LoadRange {
  uint64_t lo, hi;
};
LoadRange PoissonRange(double lambda) {
  const double spread = 12.0 * std::sqrt(lambda) + 40.0;
  return {static_cast<uint64_t>(std::max(0.0, lambda - spread)),
          static_cast<uint64_t>(lambda + spread)};
}

double PoissonWeight(double lambda, uint64_t j) {
  const auto jd = static_cast<double>(j);
  int sign = 0;  // lgamma_r, not lgamma: lgamma writes the global signgam (a data race)
  return std::exp(-lambda + jd * std::log(lambda) - lgamma_r(jd + 1, &sign));
}

// Approximate f_k(j) = (1 - (1 - 1/512)^{kj})^k. It ignores the spread of the number of occupied
// bits, so by Jensen it is <= the exact value: the exact max load is <= the approximate one.
double ApproxBlockFpr(uint32_t k, uint64_t j) {
  const double unset = std::pow(1.0 - 1.0 / kBlockBits, static_cast<double>(k) * j);
  return std::pow(1.0 - unset, k);
}

double ApproxFpr(double lambda, uint32_t k) {
  const LoadRange range = PoissonRange(lambda);
  double sum = 0;
  for (uint64_t j = range.lo; j <= range.hi; ++j) {
    sum += PoissonWeight(lambda, j) * ApproxBlockFpr(k, j);
  }
  return sum;
}

// Exact f_k(j) tables, extended on demand and shared by all callers.
class ExactTables {
 public:
  double Fpr(double lambda, uint32_t k) {
    // Far past any saturated load (kSaturated: at most about 11,000 items in a block): every
    // load the Poisson mass covers answers "maybe". Whatever count a record claims (an imported
    // dump's header may say 2^60 items), the answer costs no more than a table's length.
    if (lambda > kSurelySaturatedLoad) return 1.0;
    const LoadRange range = PoissonRange(lambda);
    bloomsync::MutexLock lock(&mu_);
    Table& table = tables_[k];
    Extend(k, range.hi, table);
    // Loads in the table, then the mass above it, whose loads are saturated (f = 1).
    double sum = 0;
    double mass = 0;
    const uint64_t tabled_end = std::min<uint64_t>(range.hi + 1, table.f.size());
    for (uint64_t j = range.lo; j < tabled_end; ++j) {
      const double weight = PoissonWeight(lambda, j);
      sum += weight * table.f[j];
      mass += weight;
    }
    if (range.hi >= table.f.size()) sum += std::max(0.0, 1.0 - mass);
    return std::min(sum, 1.0);
  }

 private:
  struct Table {
    std::vector<double> occupancy;  // P(X = x) after k * (f.size() - 1) throws
    std::vector<double> f;          // f[j] = E[(X_{kj} / 512)^k]
  };

  // Once the approximation says a block of load j answers "maybe" with probability above
  // 1 - 1e-9, the exact value is even closer to 1: report 1 (conservative) and stop extending.
  static constexpr double kSaturated = 1.0 - 1e-9;
  // Loads this high saturate a block for every hash count, with the whole Poisson range
  // around them (k = 1 saturates at about 512 * ln(1e9), 10,600 items).
  static constexpr double kSurelySaturatedLoad = 1e6;

  void Extend(uint32_t k, uint64_t max_load, Table& t) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (t.f.empty()) {
      t.occupancy.assign(kBlockBits + 1, 0.0);
      t.occupancy[0] = 1.0;
      t.f.push_back(0.0);
    }
    while (t.f.size() <= max_load && ApproxBlockFpr(k, t.f.size()) < kSaturated) {
      for (uint32_t i = 0; i < k; ++i) Throw(t.occupancy);
      double expected = 0;
      for (uint32_t x = 1; x <= kBlockBits; ++x) {
        expected += t.occupancy[x] * std::pow(static_cast<double>(x) / kBlockBits, k);
      }
      t.f.push_back(expected);
    }
  }

  // One uniform bit throw: an occupied bit stays occupied, a free one becomes occupied.
  static void Throw(std::vector<double>& p) {
    for (uint32_t x = kBlockBits; x > 0; --x) {
      p[x] = p[x] * x / kBlockBits + p[x - 1] * (kBlockBits - x + 1) / kBlockBits;
    }
    p[0] = 0;
  }

  bloomsync::Mutex mu_;
  std::array<Table, kMaxHashCount + 1> tables_ ABSL_GUARDED_BY(mu_);
};

ExactTables& Tables() {
  static auto* tables = new ExactTables();
  return *tables;
}

// Largest load in [0, hi] with fpr(load) <= target; fpr increases with the load.
template <typename Fpr>
double MaxLoad(double target, double hi, Fpr fpr) {
  double lo = 0;
  for (int i = 0; i < 60; ++i) {
    const double mid = (lo + hi) / 2;
    (fpr(mid) <= target ? lo : hi) = mid;
  }
  return lo;
}

struct BestLoad {
  double items_per_block = 0;
  uint32_t hash_count = 1;
};

BestLoad BestLoadFor(double error_rate) {
  // Pass 1, cheap: the approximate optimum over every k.
  std::array<double, kMaxHashCount + 1> approx_load{};
  uint32_t approx_best = 1;
  for (uint32_t k = 1; k <= kMaxHashCount; ++k) {
    approx_load[k] =
        MaxLoad(error_rate, 8.0 * kBlockBits, [k](double l) { return ApproxFpr(l, k); });
    if (approx_load[k] > approx_load[approx_best]) approx_best = k;
  }
  // Pass 2, exact, for k near the approximate optimum, searching below the approximate load.
  BestLoad best;
  const uint32_t k_lo = approx_best > 3 ? approx_best - 3 : 1;
  const uint32_t k_hi = std::min(kMaxHashCount, approx_best + 3);
  for (uint32_t k = k_lo; k <= k_hi; ++k) {
    const double load = MaxLoad(error_rate, approx_load[k] * 1.001 + 1e-9,
                                [k](double l) { return Tables().Fpr(l, k); });
    if (load > best.items_per_block) best = {load, k};
  }
  return best;
}

// `error_rate` rounded down to two significant digits (0.0137 -> 0.013): sizing for it meets the
// asked rate and costs at most ~1.5% more bits, and there are only ~90 such rates per decade,
// so a caller sending endless distinct rates cannot make the server run endless searches.
double SizingRate(double error_rate) {
  const double scale = std::pow(10.0, std::floor(std::log10(error_rate)) - 1);
  double rounded = std::floor(error_rate / scale + 1e-9) * scale;
  // Floating point may land a hair above the asked rate; never size for a looser one.
  while (rounded > error_rate) rounded = std::nextafter(rounded, 0.0);
  return rounded > 0 ? rounded : error_rate;
}

// BestLoadFor memoised by SizingRate: filters of one service mostly share a handful of error
// rates, and each search costs tens of milliseconds.
BestLoad CachedBestLoadFor(double asked_rate) {
  const double error_rate = SizingRate(asked_rate);
  static auto* mu = new bloomsync::Mutex();
  static auto* cache = new absl::flat_hash_map<double, BestLoad>();  // guarded by *mu
  {
    bloomsync::MutexLock lock(mu);
    if (auto it = cache->find(error_rate); it != cache->end()) return it->second;
  }
  const BestLoad best = BestLoadFor(error_rate);
  bloomsync::MutexLock lock(mu);
  if (cache->size() > 4096) cache->clear();  // bounded: hostile callers may send many rates
  cache->emplace(error_rate, best);
  return best;
}

}  // namespace

double BlockedFalsePositiveRate(double items_per_block, uint32_t hash_count) {
  if (items_per_block <= 0) return 0;
  return Tables().Fpr(items_per_block, hash_count);
}

double EstimateCardinality(uint64_t set_bits, const BlockedLayout& layout) {
  const auto bits = static_cast<double>(layout.bits());
  // A full filter says only "at least this many"; cap the fill just below 1.
  const double fill = std::min(static_cast<double>(set_bits), bits - 0.5) / bits;
  const double per_item = 1 - std::pow(1.0 - 1.0 / kBlockBits, layout.hash_count);
  return -static_cast<double>(layout.num_blocks) * std::log1p(-fill) / per_item;
}

absl::StatusOr<BlockedLayout> ChooseLayout(uint64_t capacity, double error_rate) {
  if (capacity == 0) return absl::InvalidArgumentError("capacity must be at least 1");
  if (!(error_rate > 0 && error_rate < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("error_rate must be in (0, 1), got ", error_rate));
  }
  const BestLoad best = CachedBestLoadFor(error_rate);
  if (!(best.items_per_block > 0)) {
    return absl::InvalidArgumentError(absl::StrCat("error_rate ", error_rate, " is too small"));
  }
  const double blocks = std::ceil(static_cast<double>(capacity) / best.items_per_block);
  if (!(blocks <= static_cast<double>(kMaxBlocks))) {
    return absl::ResourceExhaustedError(
        absl::StrCat("capacity ", capacity, " at error_rate ", error_rate, " needs ", blocks,
                     " blocks of 64 bytes; a sub-filter holds at most ", kMaxBlocks));
  }
  return BlockedLayout{std::max<uint64_t>(1, static_cast<uint64_t>(blocks)), best.hash_count};
}

double BlockedBitsPerItem(double error_rate) {
  return kBlockBits / CachedBestLoadFor(error_rate).items_per_block;
}

double SplitBlockBitsPerItem(double error_rate) {
  constexpr double kSplitBlockBits = 256;
  auto fpr = [](double lambda) {
    const LoadRange range = PoissonRange(lambda);
    double sum = 0;
    for (uint64_t j = range.lo; j <= range.hi; ++j) {
      sum += PoissonWeight(lambda, j) *
             std::pow(1.0 - std::pow(31.0 / 32.0, static_cast<double>(j)), 8);
    }
    return sum;
  };
  return kSplitBlockBits / MaxLoad(error_rate, 8.0 * kSplitBlockBits, fpr);
}

double StandardBitsPerItem(double error_rate) {
  return -std::log(error_rate) / (std::log(2.0) * std::log(2.0));
}

}  // namespace bloom
