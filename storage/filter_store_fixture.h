// The FilterStore fixture the store's tests share: a store on a fresh temp dir, without the
// background checkpointer, and (where CRASH_HELPER_PATH is defined) a helper process to kill.
#ifndef STORAGE_FILTER_STORE_FIXTURE_H_
#define STORAGE_FILTER_STORE_FIXTURE_H_

#include <sys/wait.h>

#include <csignal>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "storage/filter_store.h"
#include "tests/support/items.h"
#include "tests/support/testing.h"

namespace storage {

class FilterStoreTest : public ::testing::Test {
 protected:
  void Open(StoreOptions options = {}) {
    store_.reset();
    options.data_dir = dir_.path();
    absl::StatusOr<std::unique_ptr<FilterStore>> store = FilterStore::Open(options);
    ASSERT_OK(store.status());
    store_ = *std::move(store);
  }
  void SetUp() override {
    StoreOptions options;
    options.background_checkpoints = false;
    Open(options);
  }

  // Every item must read as present.
  void ExpectAllPresent(absl::string_view filter, const std::vector<std::string>& items) {
    absl::StatusOr<std::vector<bool>> present =
        store_->MightContain(filter, bloomtest::Views(items));
    ASSERT_OK(present.status());
    for (size_t i = 0; i < items.size(); ++i) {
      ASSERT_TRUE((*present)[i]) << "false negative for " << items[i];
    }
  }

#ifdef CRASH_HELPER_PATH
  // Runs the crash helper (which ends with SIGKILL) and returns how many batches it acked;
  // adds to `new_items` how many of their items were new.
  int RunCrashHelper(const std::string& filter, int batches, int batch_size, int checkpoint_after,
                     bool sync, uint64_t* new_items = nullptr) {
    store_.reset();  // the helper needs the directory lock
    const std::string command =
        absl::StrCat(CRASH_HELPER_PATH, " ", dir_.path(), " ", filter, " ", batches, " ",
                     batch_size, " ", checkpoint_after, " ", sync ? 1 : 0);
    FILE* out = popen(command.c_str(), "r");
    if (out == nullptr) {
      ADD_FAILURE() << "popen failed";
      return 0;
    }
    int acked = 0;
    char line[128];
    while (std::fgets(line, sizeof(line), out) != nullptr) {
      int batch = 0;
      long added = 0;
      if (std::sscanf(line, "acked %d %ld", &batch, &added) == 2) {
        ++acked;
        if (new_items != nullptr) *new_items += added;
      }
    }
    const int status = pclose(out);
    EXPECT_TRUE(WIFSIGNALED(status) || (WIFEXITED(status) && WEXITSTATUS(status) == 128 + SIGKILL))
        << "helper should die by SIGKILL, status " << status;
    return acked;
  }
#endif  // CRASH_HELPER_PATH

  bloomtest::TempDir dir_;
  std::unique_ptr<FilterStore> store_;
};

}  // namespace storage

#endif  // STORAGE_FILTER_STORE_FIXTURE_H_
