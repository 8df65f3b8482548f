// BloomClient: a small C++ client for bloom-server.
//
//   auto client = bloomclient::BloomClient::Connect("127.0.0.1:50051");
//   bloom::v1::FilterSpec spec;
//   spec.set_capacity(1'000'000);
//   spec.set_error_rate(0.01);
//   client->Reserve("users", spec);                       // safe from every replica
//   client->Add("users", {"alice", "bob"});
//   absl::StatusOr<std::vector<bool>> seen = client->MightContain("users", {"alice", "carol"});
//   client->AddIntegers("ids", {1001, 1002});           // sent as "1001", "1002"
//
// Every call has a deadline (ClientOptions::timeout). Lists of items longer than
// ClientOptions::batch_size are sent as several requests, in order; each request is atomic on
// the server, the list as a whole is not. Errors keep the server's gRPC code, so callers can
// branch on absl::IsNotFound(status) etc.
//
// Pipelined mode (ClientOptions::pipelined): Add, MightContain, Remove and Count calls of up to
// batch_size items travel over bloom.v1.Pipeline streams (Count once the stream's server has
// said it takes counts; until then, and with older servers, Count is a unary call), and concurrent
// calls of one kind on the same filter are coalesced into one operation (coalescer.h). Use it when
// many threads make small calls: the server then pays per batch, not per call. A broken stream
// fails its unanswered calls with UNAVAILABLE (retry an add, which is idempotent; a remove may have
// been made).
//
// A server that is unreachable fails calls with UNAVAILABLE at once; after such a failure the
// client polls its reconnection (reconnect_poller.h), so it is back as soon as the server is.
//
// Thread-safety: a BloomClient is safe to use from many threads at once (gRPC stubs are).
#ifndef CLIENT_BLOOM_CLIENT_H_
#define CLIENT_BLOOM_CLIENT_H_

#include <grpcpp/channel.h>

#include <cstdint>
#include <functional>
#include <istream>
#include <memory>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "bloom/v1/bloom.grpc.pb.h"
#include "client/coalescer.h"
#include "client/shard_routes.h"

namespace bloomclient {

class ReconnectPoller;  // client/reconnect_poller.h

// TLS settings of a client (see BloomClient::Open).
struct ClientTls {
  bool enabled = false;
  std::string ca_file;    // PEM roots to verify the server with; "" = the system's roots
  std::string cert_file;  // PEM client certificate and key, for servers that require mTLS
  std::string key_file;
  std::string server_name;  // the name to verify in the server's certificate, if not the host
};

struct ClientOptions {
  absl::Duration timeout = absl::Seconds(10);  // per request
  size_t batch_size = 10'000;                  // items per Add/MightContain request
  // Sent as "authorization: Bearer <token>" with every call; "" = none.
  std::string token;
  // Headers sent with every unary call and transfer (not on Pipeline streams).
  std::vector<std::pair<std::string, std::string>> metadata;
  ClientTls tls;
  // Add/MightContain over coalescing Pipeline streams (see above), and how many streams.
  bool pipelined = false;
  size_t pipeline_streams = 1;
  // Batches in flight per stream: 2 lets the server serve one while this side delivers the
  // other's answers, when a batch holds many operations (more calls per second for one-key
  // calls on per-user filters, at some server CPU per key: tests/bench/compare.sh scenario 5);
  // 1 keeps batches whole.
  size_t pipeline_rounds = 2;
  // In a sharded deployment (bloom-server --shard_map): fetch the shard map from the target and
  // send each call for a filter straight to the primary of the group that owns it, and each
  // group's pipelined calls on streams of their own (client/shard_routes.h). Without it, the
  // pod named forwards every call for another group's filter there (one more hop); a
  // Pipeline stream carries only the filters of its pod's group. Harmless with an unsharded
  // server.
  bool shard_routing = false;
};

// The one place where a grpc::Status becomes an absl::Status (same code, same message).
absl::Status FromGrpcStatus(const grpc::Status& status);

class BloomClient {
 public:
  // A plaintext channel to `target`; gRPC connects on first use. options.tls is ignored: use
  // Open() for TLS. `target` is "host:port", or names several pods of a replicated deployment:
  // "dns:///name:port" (every address the name has, e.g. a headless Service's) or
  // "ipv4:10.0.0.1:50051,10.0.0.2:50051". Calls are then spread over the pods that answer, and
  // a pod that goes away is skipped at once (gRPC's round_robin).
  static std::unique_ptr<BloomClient> Connect(const std::string& target,
                                              ClientOptions options = {});
  // Like Connect, over TLS when options.tls.enabled. NOT_FOUND / INVALID_ARGUMENT when a TLS
  // file cannot be read or only one of cert_file and key_file is given.
  static absl::StatusOr<std::unique_ptr<BloomClient>> Open(const std::string& target,
                                                           ClientOptions options = {});
  // `connect` opens a channel to another address as the one to the target was opened (with
  // shard_routing: to each group's primary); null: shard_routing is off.
  BloomClient(
      std::shared_ptr<grpc::Channel> channel, ClientOptions options,
      std::function<std::shared_ptr<grpc::Channel>(const std::string& address)> connect = nullptr);
  ~BloomClient();
  BloomClient(const BloomClient&) = delete;
  BloomClient& operator=(const BloomClient&) = delete;

  absl::StatusOr<bloom::v1::ReserveResponse> Reserve(absl::string_view name,
                                                     const bloom::v1::FilterSpec& spec);
  // An empty filter with the spec and hash seed of `like`, so that the two can be merged.
  absl::StatusOr<bloom::v1::ReserveResponse> ReserveLike(absl::string_view name,
                                                         absl::string_view like);
  // ORs `sources` into `target` (filters alike): answers the target's stats.
  absl::StatusOr<bloom::v1::FilterStats> Merge(absl::string_view target,
                                               absl::Span<const std::string> sources);

  // added[i]: items[i] was (probably) new. With `create_if_missing`, a missing filter is
  // created with that spec.
  absl::StatusOr<std::vector<bool>> Add(absl::string_view name, absl::Span<const std::string> items,
                                        const bloom::v1::FilterSpec* create_if_missing = nullptr);
  absl::StatusOr<std::vector<bool>> AddIntegers(
      absl::string_view name, absl::Span<const int64_t> values,
      const bloom::v1::FilterSpec* create_if_missing = nullptr);
  // present[i] false: items[i] was never added. With `absent_if_missing`, a filter that does
  // not exist answers all false instead of NOT_FOUND (and nothing is created).
  absl::StatusOr<std::vector<bool>> MightContain(absl::string_view name,
                                                 absl::Span<const std::string> items,
                                                 bool absent_if_missing = false);
  absl::StatusOr<std::vector<bool>> MightContainIntegers(absl::string_view name,
                                                         absl::Span<const int64_t> values);

  // CUCKOO filters (FAILED_PRECONDITION for a BLOOM filter). removed[i]: a copy of items[i]
  // was removed. Not idempotent: a retried Remove removes another copy, if there is one.
  absl::StatusOr<std::vector<bool>> Remove(absl::string_view name,
                                           absl::Span<const std::string> items);
  // counts[i]: the copies of items[i] the filter holds.
  absl::StatusOr<std::vector<uint32_t>> Count(absl::string_view name,
                                              absl::Span<const std::string> items);

  absl::StatusOr<bloom::v1::FilterStats> Stats(absl::string_view name);
  absl::Status Delete(absl::string_view name);
  absl::StatusOr<bloom::v1::ListResponse> List(absl::string_view prefix = "",
                                               uint32_t page_size = 0,
                                               absl::string_view page_token = "");

  // Writes the dump of `name` to `out`. The deadline is ClientOptions::timeout per MiB + 1.
  absl::Status Export(absl::string_view name, std::ostream& out);
  // Creates `name` from a dump read from `in`. With `merge_into_existing`, an existing filter
  // `name` (alike the dump's) gets the dump ORed into it instead.
  absl::StatusOr<bloom::v1::FilterStats> Import(absl::string_view name, std::istream& in,
                                                bool merge_into_existing = false);

  // Read-your-writes through followers: the highest sequence a write through this client was
  // given. Reads send it as min_sequence, so a follower answers them only once it has applied
  // every write this client made (or forwards them to the primary). ObserveSequence raises it
  // with one learned elsewhere (another client or process that wrote).
  uint64_t last_sequence() const { return last_sequence_.load(); }
  void ObserveSequence(uint64_t sequence) { RaiseSequence(last_sequence_, sequence); }

  // Asks the server's grpc.health.v1 service (overall status): true when SERVING.
  absl::StatusOr<bool> Serving();

  // With shard_routing, the version of the shard map this client routes by (0: none, or the
  // deployment is not sharded).
  uint64_t shard_map_version() const;

  // Raw stub access, for calls this wrapper does not cover.
  bloom::v1::BloomFilterService::Stub& stub() { return *stub_; }
  // The channel, for other services of the same server (bloom-cli's replication status); and
  // a context with this client's token and timeout for a call on it.
  const std::shared_ptr<grpc::Channel>& channel() const { return channel_; }
  void PrepareContext(grpc::ClientContext& context) const { Prepare(context); }

 private:
  // Adds the token and, with `deadline`, ClientOptions::timeout.
  void Prepare(grpc::ClientContext& context, bool deadline = true) const;
  // A unary or streaming call's outcome; UNAVAILABLE wakes the reconnect poller. With
  // `context` and shard routing, an answer saying the shard map changed fetches it again.
  absl::Status Finished(const grpc::Status& status,
                        const grpc::ClientContext* context = nullptr) const;
  // The same for a call through the coalescer (pipelined mode).
  absl::StatusOr<std::vector<bool>> Coalesced(absl::StatusOr<std::vector<bool>> answers) const;
  // Reserve and ReserveLike: the call, and the sequence it answers.
  absl::StatusOr<bloom::v1::ReserveResponse> SendReserve(const bloom::v1::ReserveRequest& request);
  // Sends `items` in batches through `call`, concatenating the answers.
  absl::StatusOr<std::vector<bool>> Batched(
      absl::Span<const std::string> items,
      const std::function<absl::Status(absl::Span<const std::string>, std::vector<bool>&)>& call);

  // Whether a call with `items` goes through the coalescer.
  bool Coalesces(absl::Span<const std::string> items) const;
  // With shard routing, the group whose primary serves `name` (null: the target serves it),
  // and that group's stub and coalescer (the target's for null).
  std::shared_ptr<ShardRoutes::Group> Route(absl::string_view name) const;
  bloom::v1::BloomFilterService::Stub* StubFor(
      const std::shared_ptr<ShardRoutes::Group>& group) const;
  Coalescer* CoalescerFor(const std::shared_ptr<ShardRoutes::Group>& group) const;

  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<bloom::v1::BloomFilterService::Stub> stub_;
  const ClientOptions options_;
  std::atomic<uint64_t> last_sequence_{0};  // before coalescer_, which uses it
  std::unique_ptr<Coalescer> coalescer_;    // pipelined mode; uses stub_, so declared after it
  std::unique_ptr<ReconnectPoller> reconnect_poller_;
  std::unique_ptr<ShardRoutes> routes_;  // shard_routing; uses stub_ and Prepare
};

}  // namespace bloomclient

#endif  // CLIENT_BLOOM_CLIENT_H_
