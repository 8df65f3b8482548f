// The server's flags: byte sizes and memory shares parse as documented, bad values are refused
// with a message naming the flag, BLOOM_<FLAG> environment variables set flags, and every flag
// is documented in docs/operations.md.
#include "server/server_flags.h"

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <utility>
#include <vector>

#include "absl/flags/reflection.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "storage/memory/resident_charge.h"
#include "tests/support/testing.h"

namespace server {
namespace {

std::string ReadSourceFile(const std::string& path) {
  std::ifstream in(std::string(BLOOM_SOURCE_DIR) + "/" + path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(ParseBytesTest, AcceptsPlainNumbersAndBinaryAndDecimalSuffixes) {
  const struct {
    const char* text;
    uint64_t bytes;
  } kCases[] = {{"0", 0},
                {"1048576", 1048576},
                {"64Ki", 64 << 10},
                {"512Mi", 512ULL << 20},
                {"4Gi", 4ULL << 30},
                {"2Ti", 2ULL << 40},
                {"1K", 1000},
                {"3M", 3'000'000},
                {"1G", 1'000'000'000},
                {"18446744073709551615", UINT64_MAX}};
  for (const auto& c : kCases) {
    uint64_t bytes = 7;
    EXPECT_TRUE(ParseBytes(c.text, bytes)) << c.text;
    EXPECT_EQ(bytes, c.bytes) << c.text;
  }
}

TEST(ParseBytesTest, RefusesWhatIsNotASize) {
  for (const char* text :
       {"", "Mi", "-1", "1.5Gi", "1mi", "0x10", "16777216Ti", "18446744073709551616", "1Pi"}) {
    uint64_t bytes = 7;
    EXPECT_FALSE(ParseBytes(text, bytes)) << text;
    EXPECT_EQ(bytes, 7u) << text << ": changed on failure";
  }
}

TEST(ParseMemoryLimitTest, APercentIsAShareOfTheContainer) {
  const bloomsys::ContainerMemory container{.bytes = 8ULL << 30, .source = "test"};
  uint64_t bytes = 0;
  ASSERT_TRUE(ParseMemoryLimit("50%", container, bytes));
  EXPECT_EQ(bytes, 4ULL << 30);
  ASSERT_TRUE(ParseMemoryLimit("12.5%", container, bytes));
  EXPECT_EQ(bytes, 1ULL << 30);
  ASSERT_TRUE(ParseMemoryLimit("100%", container, bytes));
  EXPECT_EQ(bytes, 8ULL << 30);
  ASSERT_TRUE(ParseMemoryLimit("256Mi", container, bytes));
  EXPECT_EQ(bytes, 256ULL << 20);
  for (const char* text : {"0%", "101%", "-5%", "%", "half%"}) {
    EXPECT_FALSE(ParseMemoryLimit(text, container, bytes)) << text;
  }
}

// Sets a flag for one test and restores its default after.
class FlagsTest : public ::testing::Test {
 protected:
  void SetFlag(const char* name, const char* value) {
    absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
    ASSERT_NE(flag, nullptr) << name;
    std::string error;
    ASSERT_TRUE(flag->ParseFrom(value, &error)) << name << ": " << error;
  }
  const bloomsys::ContainerMemory container_{.bytes = 4ULL << 30, .source = "test"};

 private:
  absl::FlagSaver saver_;
};

TEST_F(FlagsTest, TheDefaultsMakeAValidConfig) {
  absl::StatusOr<ServerConfig> config = ConfigFromFlags(container_);
  ASSERT_OK(config.status());
  EXPECT_EQ(config->server.listen, "127.0.0.1:50051");
  EXPECT_EQ(config->store.data_dir, "./bloom-data");
  EXPECT_EQ(config->store.memory_limit_bytes, 2ULL << 30);  // 50% of the container
  EXPECT_EQ(config->server.transport_memory_bytes, 256 << 20);
  EXPECT_EQ(config->server.max_message_bytes, 16 << 20);
  // Clients balancing over a DNS name find pods added by scaling up within this (operations.md).
  EXPECT_EQ(config->server.max_connection_age, absl::Minutes(10));
  EXPECT_EQ(config->server.limits.transfer_min_bytes_per_second, 64u << 10);
  EXPECT_TRUE(config->warnings.empty());
}

TEST_F(FlagsTest, BadValuesAreRefusedNamingTheFlag) {
  const struct {
    const char* flag;
    const char* value;
  } kBad[] = {{"memory_limit", "lots"},
              {"max_batch", "0"},
              {"pipeline_window", "0"},
              {"max_message_bytes", "100"},
              {"max_message_bytes", "4Gi"},
              {"transport_memory", "200%"},
              {"transfer_min_rate", "fast"},
              {"max_concurrent_streams", "0"},
              {"max_connection_idle", "-1s"},
              {"max_connection_age", "-1s"},
              {"server_model", "threads"},
              {"open_methods", "everything"},
              {"tls_client_ca_file", "/ca.pem"},
              {"min_replica_acks", "-1"},
              {"min_replica_acks", "17"},
              {"replica_ack_timeout", "0s"},
              {"max_replica_lag", "-1s"},
              {"replication_log_limit", "much"},
              {"replicate_from", "primary-without-port"},
              {"checkpoint_write_rate", "-1"},
              {"replication_cert_file", "/client.crt"},
              {"item_call_threads", "-1"},
              {"item_call_threads", "65"}};
  for (const auto& bad : kBad) {
    absl::FlagSaver restore;
    SetFlag(bad.flag, bad.value);
    absl::StatusOr<ServerConfig> config = ConfigFromFlags(container_);
    EXPECT_FALSE(config.ok()) << bad.flag << "=" << bad.value;
    EXPECT_TRUE(absl::StrContains(config.status().message(), absl::StrCat("--", bad.flag)))
        << bad.flag << ": " << config.status().message();
  }
}

TEST_F(FlagsTest, AFollowersClientCertificateNeedsItsKeyAndTls) {
  SetFlag("replicate_from", "bloom-0:50051");
  SetFlag("replication_cert_file", "/tls/client.crt");
  SetFlag("replication_key_file", "/tls/client.key");
  absl::StatusOr<ServerConfig> plaintext = ConfigFromFlags(container_);
  ASSERT_FALSE(plaintext.ok());
  EXPECT_TRUE(absl::StrContains(plaintext.status().message(), "--replication_ca_file"));
  SetFlag("replication_ca_file", "/tls/ca.crt");
  absl::StatusOr<ServerConfig> mutual = ConfigFromFlags(container_);
  ASSERT_OK(mutual.status());
  EXPECT_EQ(mutual->replication.cert_file, "/tls/client.crt");
  EXPECT_EQ(mutual->replication.key_file, "/tls/client.key");
}

TEST_F(FlagsTest, EtcdCredentialsNeedEtcdAndComeInPairs) {
  SetFlag("etcd_ca_file", "/etcd/ca.crt");
  absl::StatusOr<ServerConfig> without_etcd = ConfigFromFlags(container_);
  ASSERT_FALSE(without_etcd.ok());
  EXPECT_TRUE(absl::StrContains(without_etcd.status().message(), "--etcd_endpoints"));
  SetFlag("etcd_endpoints", "127.0.0.1:2379");
  SetFlag("advertise_address", "127.0.0.1:50051");
  ASSERT_OK(ConfigFromFlags(container_).status());
  struct Case {
    std::vector<std::pair<const char*, const char*>> flags;
    const char* named;
  };
  const Case kCases[] = {
      {{{"etcd_cert_file", "/etcd/tls.crt"}}, "--etcd_key_file"},
      {{{"etcd_ca_file", ""}, {"etcd_cert_file", "/etcd/tls.crt"}, {"etcd_key_file", "/k"}},
       "--etcd_ca_file"},
      {{{"etcd_username", "bloom"}}, "--etcd_password_file"},
      {{{"etcd_password_file", "/etcd/password"}}, "--etcd_username"},
  };
  for (const Case& bad : kCases) {
    absl::FlagSaver restore;
    for (const auto& [flag, value] : bad.flags) SetFlag(flag, value);
    absl::StatusOr<ServerConfig> config = ConfigFromFlags(container_);
    ASSERT_FALSE(config.ok()) << bad.named;
    EXPECT_TRUE(absl::StrContains(config.status().message(), bad.named)) << config.status();
  }
  SetFlag("etcd_cert_file", "/etcd/tls.crt");
  SetFlag("etcd_key_file", "/etcd/tls.key");
  SetFlag("etcd_username", "bloom");
  SetFlag("etcd_password_file", "/etcd/password");
  absl::StatusOr<ServerConfig> secured = ConfigFromFlags(container_);
  ASSERT_OK(secured.status());
  EXPECT_EQ(secured->replication.etcd_ca_file, "/etcd/ca.crt");
  EXPECT_EQ(secured->replication.etcd_key_file, "/etcd/tls.key");
  EXPECT_EQ(secured->replication.etcd_username, "bloom");
  EXPECT_EQ(secured->replication.etcd_password_file, "/etcd/password");
}

TEST_F(FlagsTest, TheFirstShardMapsGroupsNeedTheMapAndThisPodsGroup) {
  SetFlag("shard_map_groups", "bloom/a,bloom/b");
  absl::StatusOr<ServerConfig> alone = ConfigFromFlags(container_);
  ASSERT_FALSE(alone.ok());
  EXPECT_TRUE(absl::StrContains(alone.status().message(), "--shard_map")) << alone.status();
  SetFlag("etcd_endpoints", "127.0.0.1:2379");
  SetFlag("advertise_address", "127.0.0.1:50051");
  SetFlag("shard_map", "bloom/shardmap");
  SetFlag("cluster", "bloom/c");
  absl::StatusOr<ServerConfig> stranger = ConfigFromFlags(container_);
  ASSERT_FALSE(stranger.ok());
  EXPECT_TRUE(absl::StrContains(stranger.status().message(), "--cluster=bloom/c"))
      << stranger.status();
  SetFlag("cluster", "bloom/b");
  SetFlag("shard_map_slots", "0");
  EXPECT_FALSE(ConfigFromFlags(container_).ok()) << "no slots";
  SetFlag("shard_map_slots", "64");
  absl::StatusOr<ServerConfig> config = ConfigFromFlags(container_);
  ASSERT_OK(config.status());
  EXPECT_EQ(config->replication.shard_map_groups, (std::vector<std::string>{"bloom/a", "bloom/b"}));
  EXPECT_EQ(config->replication.shard_map_slots, 64u);
}

TEST_F(FlagsTest, CheckpointWriteRateIsBytesPerSecondOrZero) {
  absl::StatusOr<ServerConfig> paced = ConfigFromFlags(container_);
  ASSERT_OK(paced.status());
  EXPECT_EQ(paced->store.checkpoint_write_bytes_per_second, 64u << 20);
  SetFlag("checkpoint_write_rate", "0");
  absl::StatusOr<ServerConfig> unpaced = ConfigFromFlags(container_);
  ASSERT_OK(unpaced.status());
  EXPECT_EQ(unpaced->store.checkpoint_write_bytes_per_second, 0u);
}

TEST_F(FlagsTest, ReplicationFlagsMakeAFollowerOrSetThePrimary) {
  absl::StatusOr<ServerConfig> primary = ConfigFromFlags(container_);
  ASSERT_OK(primary.status());
  EXPECT_FALSE(primary->store.replica);
  EXPECT_EQ(primary->store.min_replica_acks, 0);
  EXPECT_EQ(primary->store.log_retention.ttl, absl::Minutes(10));
  EXPECT_EQ(primary->store.log_retention.size_limit_bytes, 1ULL << 30);

  SetFlag("replicate_from", "bloom-0.bloom-headless:50051");
  SetFlag("min_replica_acks", "2");
  SetFlag("replica_ack_timeout", "3s");
  SetFlag("replication_log_limit", "64Mi");
  absl::StatusOr<ServerConfig> follower = ConfigFromFlags(container_);
  ASSERT_OK(follower.status());
  EXPECT_TRUE(follower->store.replica);
  EXPECT_EQ(follower->replication.replicate_from, "bloom-0.bloom-headless:50051");
  EXPECT_EQ(follower->store.min_replica_acks, 2);
  EXPECT_EQ(follower->store.replica_ack_timeout, absl::Seconds(3));
  EXPECT_EQ(follower->store.log_retention.size_limit_bytes, 64u << 20);
}

TEST_F(FlagsTest, EtcdFlagsChooseElectionAndAreChecked) {
  absl::StatusOr<ServerConfig> none = ConfigFromFlags(container_);
  ASSERT_OK(none.status());
  EXPECT_TRUE(none->replication.etcd_endpoints.empty());
  {
    absl::FlagSaver restore;
    SetFlag("ack_log", "/tmp/acks.log");  // by term: nothing to log without etcd
    absl::StatusOr<ServerConfig> ack_log = ConfigFromFlags(container_);
    EXPECT_FALSE(ack_log.ok());
    EXPECT_TRUE(absl::StrContains(ack_log.status().message(), "--ack_log")) << ack_log.status();
  }

  SetFlag("etcd_endpoints", "etcd-0:2379, etcd-1:2379");
  absl::StatusOr<ServerConfig> no_address = ConfigFromFlags(container_);
  ASSERT_FALSE(no_address.ok());
  EXPECT_TRUE(absl::StrContains(no_address.status().message(), "--advertise_address"));
  SetFlag("advertise_address", "bloom-1.bloom-headless:50051");
  SetFlag("cluster", "feeds");
  SetFlag("leader_ttl", "10s");
  SetFlag("ack_log", "/tmp/acks.log");
  absl::StatusOr<ServerConfig> elected = ConfigFromFlags(container_);
  ASSERT_OK(elected.status());
  EXPECT_EQ(elected->replication.etcd_endpoints,
            (std::vector<std::string>{"etcd-0:2379", "etcd-1:2379"}));
  EXPECT_EQ(elected->replication.advertise_address, "bloom-1.bloom-headless:50051");
  EXPECT_EQ(elected->replication.cluster, "feeds");
  EXPECT_EQ(elected->replication.leader_ttl, absl::Seconds(10));
  EXPECT_EQ(elected->replication.ack_log, "/tmp/acks.log");
  EXPECT_FALSE(elected->store.replica);  // the role is elected, not configured

  const struct {
    const char* flag;
    const char* value;
    const char* named;
  } kBad[] = {{"leader_ttl", "1s", "--leader_ttl"},
              {"leader_ttl", "2500ms", "--leader_ttl"},
              {"cluster", "", "--cluster"},
              {"etcd_endpoints", "etcd-without-port", "--etcd_endpoints"},
              {"replicate_from", "bloom-0:50051", "--replicate_from"}};
  for (const auto& bad : kBad) {
    absl::FlagSaver restore;
    SetFlag(bad.flag, bad.value);
    absl::StatusOr<ServerConfig> config = ConfigFromFlags(container_);
    EXPECT_FALSE(config.ok()) << bad.flag << "=" << bad.value;
    EXPECT_TRUE(absl::StrContains(config.status().message(), bad.named))
        << bad.flag << ": " << config.status().message();
  }
}

TEST(NamesThisHostTest, APodFindsItselfInThePrimarysAddress) {
  EXPECT_TRUE(NamesThisHost("bloom-0.bloom-headless.ns.svc:50051", "bloom-0"));
  EXPECT_TRUE(NamesThisHost("bloom-0:50051", "bloom-0"));
  EXPECT_FALSE(NamesThisHost("bloom-0.bloom-headless.ns.svc:50051", "bloom-1"));
  EXPECT_FALSE(NamesThisHost("bloom-01.bloom-headless:50051", "bloom-0"));
  EXPECT_FALSE(NamesThisHost("bloom-0:50051", ""));
}

TEST_F(FlagsTest, TheLogLevelIsOneOfFour) {
  SetFlag("log_level", "warning");
  SetFlag("log_json", "true");
  absl::StatusOr<LogConfig> log = LogConfigFromFlags();
  ASSERT_OK(log.status());
  EXPECT_EQ(log->level, bloomlog::Level::kWarning);
  EXPECT_TRUE(log->json);
  SetFlag("log_level", "loud");
  EXPECT_EQ(LogConfigFromFlags().status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(FlagsTest, RetiredFlagsWarn) {
  SetFlag("server_model", "sync");
  SetFlag("max_threads", "8");
  absl::StatusOr<ServerConfig> config = ConfigFromFlags(container_);
  ASSERT_OK(config.status());
  EXPECT_EQ(config->warnings.size(), 2u);
}

TEST_F(FlagsTest, EnvironmentVariablesSetFlags) {
  ASSERT_EQ(setenv("BLOOM_MAX_BATCH", "123", 1), 0);
  ASSERT_EQ(setenv("BLOOM_DATA_DIR", "/var/lib/bloom", 1), 0);
  const absl::Status applied = ApplyFlagEnvironment();
  unsetenv("BLOOM_MAX_BATCH");
  unsetenv("BLOOM_DATA_DIR");
  ASSERT_OK(applied);
  absl::StatusOr<ServerConfig> config = ConfigFromFlags(container_);
  ASSERT_OK(config.status());
  EXPECT_EQ(config->server.limits.max_batch, 123u);
  EXPECT_EQ(config->store.data_dir, "/var/lib/bloom");

  ASSERT_EQ(setenv("BLOOM_SYNC", "perhaps", 1), 0);
  const absl::Status bad = ApplyFlagEnvironment();
  unsetenv("BLOOM_SYNC");
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(bad.message(), "BLOOM_SYNC")) << bad.message();
}

// docs/operations.md is where users look a flag up: each has its row, and the bookkeeping
// charge it quotes is the one the code charges.
TEST(FlagDocsTest, EveryFlagIsDocumentedWithTheCurrentCharge) {
  const std::string operations = ReadSourceFile("docs/operations.md");
  ASSERT_FALSE(operations.empty());
  const std::vector<std::string> names = ServerFlagNames();
  EXPECT_GE(names.size(), 30u);
  for (const std::string& name : names) {
    EXPECT_TRUE(absl::StrContains(operations, absl::StrCat("`--", name, "`")) ||
                absl::StrContains(operations, absl::StrCat("`--", name, "`,")))
        << "--" << name << " is not in docs/operations.md";
  }
  const std::string charge =
      absl::StrCat(storage::kResidentFilterOverheadBytes, " bytes of bookkeeping");
  EXPECT_TRUE(absl::StrContains(operations, charge)) << "docs/operations.md should say " << charge;
}

}  // namespace
}  // namespace server
