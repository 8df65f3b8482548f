// WalArchive: the archive of log files kept for followers stays within its size and age, and
// is kept only while someone reads the log (the time of the last read survives a restart).
// Files stand in for RocksDB's archived logs; their ages are set with utimes, and Purge is
// given the time to judge them at (no thread: interval zero).
#include "storage/replica/wal_archive.h"

#include <sys/time.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/support/testing.h"

namespace storage {
namespace {

class WalArchiveTest : public ::testing::Test {
 protected:
  void SetUp() override { std::filesystem::create_directories(archive_); }

  // An archived log file of `bytes`, last modified `age` before `now_`.
  void Archive(uint64_t number, size_t bytes, absl::Duration age) {
    const std::string path = absl::StrCat(archive_, "/", number, ".log");
    std::ofstream(path) << std::string(bytes, 'w');
    const timeval when = absl::ToTimeval(now_ - age);
    const timeval times[2] = {when, when};
    ASSERT_EQ(utimes(path.c_str(), times), 0);
  }

  std::vector<std::string> Left() const {
    std::vector<std::string> names;
    for (const auto& entry : std::filesystem::directory_iterator(archive_)) {
      names.push_back(entry.path().filename().string());
    }
    std::sort(names.begin(), names.end());
    return names;
  }

  bloomtest::TempDir dir_;
  const std::string archive_ = dir_.path() + "/archive";
  const absl::Time now_ = absl::Now();
  const LogRetention retention_{absl::Minutes(10), 3000};
};

TEST_F(WalArchiveTest, OldestFilesGoUntilTheArchiveIsWithinItsLimit) {
  WalArchive archive(rocksdb::Env::Default(), dir_.path(), retention_, absl::ZeroDuration());
  archive.NoteReader();
  Archive(7, 1000, absl::Seconds(30));
  Archive(9, 1000, absl::Seconds(20));
  Archive(10, 1000, absl::Seconds(10));
  Archive(12, 1000, absl::Seconds(1));
  absl::StatusOr<uint64_t> kept = archive.Purge(now_);
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_EQ(*kept, 3000u);
  EXPECT_EQ(Left(), (std::vector<std::string>{"10.log", "12.log", "9.log"}));
}

TEST_F(WalArchiveTest, FilesOlderThanTheTtlGo) {
  WalArchive archive(rocksdb::Env::Default(), dir_.path(), retention_, absl::ZeroDuration());
  archive.NoteReader();
  Archive(3, 10, absl::Minutes(11));
  Archive(4, 10, absl::Minutes(9));
  ASSERT_TRUE(archive.Purge(now_).ok());
  EXPECT_EQ(Left(), std::vector<std::string>{"4.log"});
}

// A server that nobody replicates from keeps no archive; one that was read within the TTL
// keeps it after a restart (the time of the last read is kept beside the data).
TEST_F(WalArchiveTest, WithoutReadersWithinTheTtlNothingIsKeptAndTheLastReadSurvivesARestart) {
  {
    WalArchive never_read(rocksdb::Env::Default(), dir_.path(), retention_, absl::ZeroDuration());
    Archive(5, 10, absl::Seconds(1));
    ASSERT_TRUE(never_read.Purge(now_).ok());
    EXPECT_TRUE(Left().empty());
  }
  {
    WalArchive read(rocksdb::Env::Default(), dir_.path(), retention_, absl::ZeroDuration());
    read.NoteReader();
    Archive(6, 10, absl::Seconds(1));
    // The first purge after a read records it (at most once a minute).
    ASSERT_TRUE(read.Purge(now_).ok());
    EXPECT_EQ(Left(), std::vector<std::string>{"6.log"});
  }
  WalArchive restarted(rocksdb::Env::Default(), dir_.path(), retention_, absl::ZeroDuration());
  ASSERT_TRUE(restarted.Purge(now_).ok());
  EXPECT_EQ(Left(), std::vector<std::string>{"6.log"});
  // A TTL after that read, the archive goes.
  ASSERT_TRUE(restarted.Purge(now_ + absl::Minutes(11)).ok());
  EXPECT_TRUE(Left().empty());
}

TEST_F(WalArchiveTest, NoArchiveYetIsNothingToPurge) {
  std::filesystem::remove_all(archive_);
  WalArchive archive(rocksdb::Env::Default(), dir_.path(), retention_, absl::ZeroDuration());
  absl::StatusOr<uint64_t> kept = archive.Purge(now_);
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_EQ(*kept, 0u);
}

}  // namespace
}  // namespace storage
