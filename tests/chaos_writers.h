// Writers for the chaos tests (replication_test.cc, failover_chaos_test.cc): C++ pipelined
// clients and the other languages' polyglot programs adding new items through every pod while
// a nemesis kills, stops and switches pods, each recording what was acknowledged; and the
// item-by-item check that every pod holds all of it.
//
// Thread-safety: Acknowledged is thread-safe; the writer classes are owned by one test thread
// (their own threads only record into Acknowledged).
#ifndef TESTS_CHAOS_WRITERS_H_
#define TESTS_CHAOS_WRITERS_H_

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "client/bloom_client.h"
#include "gtest/gtest.h"
#include "tests/support/polyglot_command.h"
#include "tests/support/testing.h"

namespace bloomtest {

inline int EnvInt(const char* name, int fallback) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? std::atoi(value) : fallback;
}

// The client languages whose polyglot programs write (besides C++): BLOOM_REPLICATION_LANGUAGES,
// space-separated, default all four. The sanitizer builds leave Go and Java out: their programs
// are built by the go_build and java_build fixtures, which run in the ordinary build only.
inline std::vector<std::string> Languages() {
  const char* set = std::getenv("BLOOM_REPLICATION_LANGUAGES");
  if (set == nullptr || *set == '\0') return {"python", "go", "node", "java"};
  return absl::StrSplit(set, ' ', absl::SkipEmpty());
}

inline bloom::v1::FilterSpec Spec() {
  bloom::v1::FilterSpec spec;
  spec.set_capacity(10'000);
  spec.set_error_rate(0.001);  // what the polyglot programs create filters with
  return spec;
}

// Spec() with a window of an hour in 4 slices: longer than any chaos run, so that no
// acknowledged add expires before the checks.
inline bloom::v1::FilterSpec WindowedSpec() {
  bloom::v1::FilterSpec spec = Spec();
  spec.mutable_window()->set_seconds(3600);
  spec.set_window_slices(4);
  return spec;
}

// Adds acknowledged by some pod, by filter: what every pod must hold afterwards.
class Acknowledged {
 public:
  void Record(const std::string& filter, const std::vector<std::string>& items) {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<std::string>& all = items_[filter];
    all.insert(all.end(), items.begin(), items.end());
  }
  std::map<std::string, std::vector<std::string>> Snapshot() {
    std::lock_guard<std::mutex> lock(mu_);
    return items_;
  }
  size_t size() {
    std::lock_guard<std::mutex> lock(mu_);
    size_t n = 0;
    for (const auto& [filter, items] : items_) n += items.size();
    return n;
  }

 private:
  std::mutex mu_;
  std::map<std::string, std::vector<std::string>> items_;
};

// Every acknowledged item reads present on the pod at `target`, checked item by item.
inline void ExpectAllPresent(const std::string& target,
                             const std::map<std::string, std::vector<std::string>>& acknowledged) {
  std::unique_ptr<bloomclient::BloomClient> client = bloomclient::BloomClient::Connect(target);
  for (const auto& [filter, items] : acknowledged) {
    absl::StatusOr<std::vector<bool>> present = client->MightContain(filter, items);
    ASSERT_TRUE(present.ok()) << target << " " << filter << ": " << present.status();
    for (size_t i = 0; i < items.size(); ++i) {
      ASSERT_TRUE((*present)[i]) << target << " lost the acknowledged add of "
                                 << absl::CEscape(items[i]) << " to " << filter;
    }
  }
}

// C++ writers: pipelined clients, one per pod, adding batches of new items to `filters`
// filters (chaos:cpp0, chaos:cpp1, ...) until stopped; each acknowledged batch is recorded.
// With `windowed_every` n > 0, every n-th filter is made with WindowedSpec().
class CppWriters {
 public:
  CppWriters(const std::vector<std::string>& targets, Acknowledged* acknowledged, int filters = 4,
             int windowed_every = 0)
      : acknowledged_(acknowledged) {
    for (size_t w = 0; w < targets.size(); ++w) {
      threads_.emplace_back([this, target = targets[w], w, filters, windowed_every] {
        bloomclient::ClientOptions options;
        options.pipelined = true;
        options.timeout = absl::Seconds(8);
        std::unique_ptr<bloomclient::BloomClient> client =
            bloomclient::BloomClient::Connect(target, options);
        const bloom::v1::FilterSpec plain = Spec();
        const bloom::v1::FilterSpec windowed = WindowedSpec();
        for (int batch = 0; !stop_.load(); ++batch) {
          const int index = batch % filters;
          const std::string filter = absl::StrCat("chaos:cpp", index);
          const bloom::v1::FilterSpec& spec =
              windowed_every > 0 && index % windowed_every == windowed_every - 1 ? windowed : plain;
          std::vector<std::string> items;
          for (int i = 0; i < 20; ++i) items.push_back(absl::StrCat("cpp-", w, "-", batch, "-", i));
          if (client->Add(filter, items, &spec).ok()) {
            acknowledged_->Record(filter, items);
          } else {
            failures_.fetch_add(1);
          }
        }
      });
    }
  }
  ~CppWriters() { Stop(); }
  void Stop() {
    stop_.store(true);
    for (std::thread& thread : threads_) {
      if (thread.joinable()) thread.join();
    }
  }
  int failures() const { return failures_.load(); }

 private:
  Acknowledged* const acknowledged_;
  std::atomic<bool> stop_{false};
  std::atomic<int> failures_{0};
  std::vector<std::thread> threads_;
};

// The polyglot programs of the other languages, as writers: each run adds a batch of new items
// through one pod and exits 0 only once they were acknowledged.
class PolyglotWriters {
 public:
  PolyglotWriters(const std::vector<std::string>& targets, const std::string& scratch,
                  Acknowledged* acknowledged, std::vector<std::string> languages = Languages())
      : languages_(std::move(languages)) {
    for (const std::string& language : languages_) {
      threads_.emplace_back([this, language, targets, scratch, acknowledged] {
        const std::string input = absl::StrCat(scratch, "/", language, ".hex");
        for (int round = 0; !stop_.load(); ++round) {
          const std::string& target = targets[round % targets.size()];
          const std::string filter = absl::StrCat("chaos:", language);
          std::vector<std::string> items;
          for (int i = 0; i < 10; ++i) items.push_back(absl::StrCat(language, "-", round, "-", i));
          {
            std::ofstream out(input);
            for (const std::string& item : items) out << absl::BytesToHexString(item) << "\n";
          }
          const CommandResult result =
              RunCommand(absl::StrCat("timeout 20 ", PolyglotCommand(language), " ", target, " ",
                                      filter, " add < ", input));
          if (result.exit_code == 0) {
            acknowledged->Record(filter, items);
            std::lock_guard<std::mutex> lock(mu_);
            ++runs_[language];
          }
        }
      });
    }
  }
  ~PolyglotWriters() { Stop(); }
  void Stop() {
    stop_.store(true);
    for (std::thread& thread : threads_) {
      if (thread.joinable()) thread.join();
    }
  }
  // The fewest acknowledged runs of any language.
  int min_runs() {
    std::lock_guard<std::mutex> lock(mu_);
    int fewest = runs_.size() < languages_.size() ? 0 : INT_MAX;
    for (const auto& [language, runs] : runs_) fewest = std::min(fewest, runs);
    return fewest;
  }

 private:
  const std::vector<std::string> languages_;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::map<std::string, int> runs_;
  std::vector<std::thread> threads_;
};

inline std::vector<std::string> FilterNames(
    const std::map<std::string, std::vector<std::string>>& acknowledged) {
  std::vector<std::string> names;
  for (const auto& [name, items] : acknowledged) names.push_back(name);
  return names;
}

}  // namespace bloomtest

#endif  // TESTS_CHAOS_WRITERS_H_
