// Replays a fuzz target's seed corpus and saved crash inputs (fuzz/regressions) through it in
// the ordinary and sanitizer builds: every input found to crash once stays a test.
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "gtest/gtest.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

TEST(CorpusReplayTest, EveryInputRunsCleanly) {
  int inputs = 0;
  for (const char* dir : {FUZZ_CORPUS_DIR, FUZZ_REGRESSIONS_DIR}) {
    if (!std::filesystem::exists(dir)) continue;
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
      if (!entry.is_regular_file()) continue;
      std::ifstream in(entry.path(), std::ios::binary);
      const std::vector<char> bytes((std::istreambuf_iterator<char>(in)),
                                    std::istreambuf_iterator<char>());
      SCOPED_TRACE(entry.path().string());
      EXPECT_EQ(
          LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()), 0);
      ++inputs;
    }
  }
  EXPECT_GT(inputs, 0) << "no seed corpus in " << FUZZ_CORPUS_DIR;
}

}  // namespace
