#include "service/stream_connections.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace service {
namespace {

using Lease = StreamConnections::Lease;

// Channels that are never used (gRPC connects lazily), recording the addresses asked for.
class StreamConnectionsTest : public ::testing::Test {
 protected:
  StreamConnections::Connect Connect() {
    return [this](const std::string& address) {
      connected_.push_back(address);
      return grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
    };
  }

  // `count` leases for `client`, each expected to be granted.
  std::vector<std::unique_ptr<Lease>> AcquireMany(StreamConnections& streams, size_t count,
                                                  const std::string& client) {
    std::vector<std::unique_ptr<Lease>> leases;
    for (size_t i = 0; i < count; ++i) {
      absl::StatusOr<std::unique_ptr<Lease>> lease = streams.Acquire(client);
      EXPECT_TRUE(lease.ok()) << lease.status();
      if (lease.ok()) leases.push_back(*std::move(lease));
    }
    return leases;
  }

  std::vector<std::string> connected_;
};

TEST_F(StreamConnectionsTest, EachConnectionTakesAtMostItsShareOfStreams) {
  StreamConnections streams(Connect(), "primary:1");
  const size_t per = StreamConnections::kStreamsPerConnection;
  std::vector<std::unique_ptr<Lease>> first = AcquireMany(streams, per, "a");
  std::vector<std::unique_ptr<Lease>> second = AcquireMany(streams, 1, "b");
  ASSERT_EQ(first.size(), per);
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(streams.connections(), 2u);
  EXPECT_EQ(connected_, (std::vector<std::string>{"primary:1", "primary:1"}));
  for (const std::unique_ptr<Lease>& lease : first) {
    EXPECT_EQ(lease->channel(), first.front()->channel());
  }
  EXPECT_NE(second.front()->channel(), first.front()->channel());
  EXPECT_EQ(streams.streams(), per + 1);
  // A place given back on the first connection is taken again before a third is opened.
  first.pop_back();
  std::vector<std::unique_ptr<Lease>> third = AcquireMany(streams, 1, "c");
  ASSERT_EQ(third.size(), 1u);
  EXPECT_EQ(third.front()->channel(), first.front()->channel());
  EXPECT_EQ(streams.connections(), 2u);
}

TEST_F(StreamConnectionsTest, OneClientIsRefusedPastItsBoundAndOthersAreNot) {
  StreamConnections streams(Connect(), "primary:1");
  std::vector<std::unique_ptr<Lease>> held =
      AcquireMany(streams, StreamConnections::kMaxStreamsPerClient, "the peer ipv4:10.0.0.7");
  absl::StatusOr<std::unique_ptr<Lease>> refused = streams.Acquire("the peer ipv4:10.0.0.7");
  ASSERT_TRUE(absl::IsResourceExhausted(refused.status())) << refused.status();
  EXPECT_TRUE(absl::StrContains(refused.status().message(), "the peer ipv4:10.0.0.7"))
      << refused.status();
  EXPECT_TRUE(streams.Acquire("the token 'feed'").ok());
  held.pop_back();  // given back: the client may open one more
  EXPECT_TRUE(streams.Acquire("the peer ipv4:10.0.0.7").ok());
}

TEST_F(StreamConnectionsTest, TheFollowerIsRefusedPastItsBound) {
  StreamConnections streams(Connect(), "primary:1");
  std::vector<std::unique_ptr<Lease>> held;
  const size_t clients = StreamConnections::kMaxStreams / StreamConnections::kMaxStreamsPerClient;
  for (size_t c = 0; c < clients; ++c) {
    std::vector<std::unique_ptr<Lease>> more =
        AcquireMany(streams, StreamConnections::kMaxStreamsPerClient, absl::StrCat("client-", c));
    for (std::unique_ptr<Lease>& lease : more) held.push_back(std::move(lease));
  }
  ASSERT_EQ(held.size(), StreamConnections::kMaxStreams);
  EXPECT_EQ(streams.connections(),
            StreamConnections::kMaxStreams / StreamConnections::kStreamsPerConnection);
  absl::StatusOr<std::unique_ptr<Lease>> refused = streams.Acquire("a-new-client");
  ASSERT_TRUE(absl::IsResourceExhausted(refused.status())) << refused.status();
  EXPECT_TRUE(absl::StrContains(refused.status().message(), "open the stream on the primary"))
      << refused.status();
  held.clear();
  EXPECT_EQ(streams.streams(), 0u);
  EXPECT_TRUE(streams.Acquire("a-new-client").ok());
}

TEST_F(StreamConnectionsTest, AfterRetargetNewStreamsGoToTheNewPrimaryAndOldOnesKeepTheirs) {
  auto streams = std::make_unique<StreamConnections>(Connect(), "old:1");
  std::vector<std::unique_ptr<Lease>> old = AcquireMany(*streams, 2, "a");
  streams->Retarget("new:2");
  std::vector<std::unique_ptr<Lease>> later = AcquireMany(*streams, 1, "a");
  ASSERT_EQ(later.size(), 1u);
  EXPECT_EQ(connected_, (std::vector<std::string>{"old:1", "new:2"}));
  EXPECT_NE(later.front()->channel(), old.front()->channel());
  EXPECT_EQ(streams->streams(), 3u);
  // Leases outlive their StreamConnections (a proxy ending after the follower stopped).
  streams.reset();
  old.clear();
  later.clear();
}

}  // namespace
}  // namespace service
