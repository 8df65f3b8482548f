// StreamConnections (stream_connections.h): the pool of connections and the places on them.
#include "service/stream_connections.h"

#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/blocking_mutex.h"

namespace service {

struct StreamConnections::Lease::Connection {
  std::shared_ptr<grpc::Channel> channel;
  size_t streams = 0;  // guarded by the pool's mu
};

// The state leases share with the StreamConnections (which they may outlive).
struct StreamConnections::Lease::Pool {
  explicit Pool(Connect connect, std::string address)
      : connect(std::move(connect)), address(std::move(address)) {}

  const Connect connect;
  bloomsync::BlockingMutex mu;
  std::string address ABSL_GUARDED_BY(mu);
  std::vector<std::shared_ptr<Connection>> connections ABSL_GUARDED_BY(mu);  // to `address`
  absl::flat_hash_map<std::string, size_t> per_client ABSL_GUARDED_BY(mu);
  size_t streams ABSL_GUARDED_BY(mu) = 0;
};

StreamConnections::StreamConnections(Connect connect, std::string address)
    : pool_(std::make_shared<Lease::Pool>(std::move(connect), std::move(address))) {}

StreamConnections::Lease::Lease(std::shared_ptr<Pool> pool, std::shared_ptr<Connection> connection,
                                std::string client)
    : pool_(std::move(pool)),
      connection_(std::move(connection)),
      channel_(connection_->channel),
      client_(std::move(client)) {}

StreamConnections::Lease::~Lease() {
  bloomsync::BlockingLock lock(&pool_->mu);
  --connection_->streams;
  --pool_->streams;
  auto it = pool_->per_client.find(client_);
  if (it != pool_->per_client.end() && --it->second == 0) pool_->per_client.erase(it);
}

absl::StatusOr<std::unique_ptr<StreamConnections::Lease>> StreamConnections::Acquire(
    const std::string& client) {
  Lease::Pool& pool = *pool_;
  bloomsync::BlockingLock lock(&pool.mu);
  if (pool.streams >= kMaxStreams) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "this follower proxies ", kMaxStreams,
        " streams to its primary already; retry later, or open the stream on the primary"));
  }
  size_t& of_client = pool.per_client[client];
  if (of_client >= kMaxStreamsPerClient) {
    return absl::ResourceExhaustedError(
        absl::StrCat(client, " has ", of_client, " streams open through this follower; at most ",
                     kMaxStreamsPerClient, " may be"));
  }
  std::shared_ptr<Lease::Connection> chosen;
  for (const std::shared_ptr<Lease::Connection>& connection : pool.connections) {
    if (connection->streams < kStreamsPerConnection) {
      chosen = connection;
      break;
    }
  }
  if (chosen == nullptr) {
    // Not more connections than kMaxStreams needs (connections to an old primary are gone
    // from the list; their streams still count).
    chosen = std::make_shared<Lease::Connection>();
    chosen->channel = pool.connect(pool.address);
    pool.connections.push_back(chosen);
  }
  ++chosen->streams;
  ++pool.streams;
  ++of_client;
  return std::unique_ptr<Lease>(new Lease(pool_, std::move(chosen), client));
}

void StreamConnections::Retarget(std::string address) {
  bloomsync::BlockingLock lock(&pool_->mu);
  pool_->address = std::move(address);
  pool_->connections.clear();  // each open stream's lease keeps its own
}

size_t StreamConnections::streams() const {
  bloomsync::BlockingLock lock(&pool_->mu);
  return pool_->streams;
}

size_t StreamConnections::connections() const {
  bloomsync::BlockingLock lock(&pool_->mu);
  return pool_->connections.size();
}

}  // namespace service
