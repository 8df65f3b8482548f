// StreamConnections: the connections a follower opens to its primary for the streams it proxies
// (Pipeline and Import, stream_proxy.h), apart from the one its forwarded unary calls use.
//
// Why: a primary takes at most --max_concurrent_streams (64 by default) calls at once on one
// connection, and a proxied stream lives as long as its caller keeps it open. On one shared
// connection, 64 idle Pipeline streams opened through a follower (any read token will do) took
// every place, and every write forwarded from that follower waited until its deadline. Here
// each stream takes a place on a connection of the pool, at most kStreamsPerConnection per
// connection; a follower proxies at most kMaxStreams at once, and at most kMaxStreamsPerClient
// for one client (its token's label, else its address without the port): beyond that a stream
// is refused RESOURCE_EXHAUSTED at once, and the forwarded unary calls keep their connection.
//
//   StreamConnections streams(connect, "pod-0:50051");
//   absl::StatusOr<std::unique_ptr<StreamConnections::Lease>> lease = streams.Acquire(client);
//   ... a stub on (*lease)->channel(); the place is given back when the lease is destroyed.
//
// Thread-safety: thread-safe. A lease may outlive the StreamConnections it came from.
#ifndef SERVICE_STREAM_CONNECTIONS_H_
#define SERVICE_STREAM_CONNECTIONS_H_

#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "grpcpp/grpcpp.h"

namespace service {

class StreamConnections {
 public:
  // A channel to `address` on a connection of its own (not shared with other channels).
  using Connect = std::function<std::shared_ptr<grpc::Channel>(const std::string& address)>;

  // Half the primary's default --max_concurrent_streams: a connection's streams never wait for
  // a place there.
  static constexpr size_t kStreamsPerConnection = 32;
  static constexpr size_t kMaxStreams = 1024;
  static constexpr size_t kMaxStreamsPerClient = 64;

  StreamConnections(Connect connect, std::string address);
  StreamConnections(const StreamConnections&) = delete;
  StreamConnections& operator=(const StreamConnections&) = delete;

  // One stream's place on a connection; destroying it gives the place back.
  class Lease {
   public:
    ~Lease();
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    const std::shared_ptr<grpc::Channel>& channel() const { return channel_; }

   private:
    friend class StreamConnections;
    struct Pool;
    struct Connection;
    Lease(std::shared_ptr<Pool> pool, std::shared_ptr<Connection> connection, std::string client);

    const std::shared_ptr<Pool> pool_;
    const std::shared_ptr<Connection> connection_;
    const std::shared_ptr<grpc::Channel> channel_;
    const std::string client_;
  };

  // A place for a stream of `client` (a token's label, or an address); RESOURCE_EXHAUSTED,
  // naming the bound, when the follower or that client has as many streams as it may.
  absl::StatusOr<std::unique_ptr<Lease>> Acquire(const std::string& client);
  // Later streams go to `address` (another primary); open ones keep their connection.
  void Retarget(std::string address);
  // Streams holding a place now, and connections opened to the current primary.
  size_t streams() const;
  size_t connections() const;

 private:
  std::shared_ptr<Lease::Pool> pool_;
};

}  // namespace service

#endif  // SERVICE_STREAM_CONNECTIONS_H_
