// EtcdClient: the etcd v3 calls that failover is built on (a lease, its keep-alive, reads,
// writes guarded by a comparison, and a watch), over etcd's own gRPC API (etcdserverpb, the
// stubs generated from Debian's .proto files: protos/CMakeLists.txt).
//
//   ASSIGN_OR_RETURN(std::unique_ptr<EtcdClient> etcd,
//                    EtcdClient::Connect({"127.0.0.1:2379"}, absl::Seconds(2)));
//   ASSIGN_OR_RETURN(EtcdLease lease, etcd->GrantLease(absl::Seconds(5)));
//   ASSIGN_OR_RETURN(bool created, etcd->CreateIfAbsent("c1/leader", "pod-0", lease.id));
//
// Endpoints: every call goes to the current endpoint; one that fails UNAVAILABLE or
// DEADLINE_EXCEEDED makes the next endpoint current, and the caller retries (no call is
// retried here: a write that timed out may have been applied, and only its caller knows whether
// repeating it is harmless).
//
// Security (etcd_security.h): TLS to etcd, a client certificate, and a user of etcd's auth.
// With a user, the client fetches a token (etcd's Authenticate) before its first call and
// sends it with each; a call etcd refuses for its token (expired, issued before the auth store
// changed, unknown to a restarted member) was not applied, so it is repeated once with a
// fresh token.
//
// Errors are absl::Status with gRPC's code and etcd's message, prefixed with the endpoint.
//
// Thread-safety: thread-safe. A Watch is used by one thread at a time.
#ifndef COORDINATION_ETCD_CLIENT_H_
#define COORDINATION_ETCD_CLIENT_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/mutex.h"
#include "coordination/etcd_security.h"
#include "coordination/etcd_watch.h"  // EtcdWatch, KeyValue
#include "etcd/etcdserver/etcdserverpb/rpc.grpc.pb.h"
#include "grpcpp/grpcpp.h"

namespace coordination {

struct EtcdLease {
  int64_t id = 0;
  absl::Duration ttl;  // as etcd granted it
};

class EtcdClient {
 public:
  // `endpoints` are host:port of etcd members, reached as `security` says (by default in
  // plaintext, without auth). `call_timeout` bounds every unary call. Fails INVALID_ARGUMENT
  // without endpoints or with settings that do not go together; it does not wait for etcd to
  // answer.
  static absl::StatusOr<std::unique_ptr<EtcdClient>> Connect(std::vector<std::string> endpoints,
                                                             absl::Duration call_timeout,
                                                             EtcdSecurity security = {});

  // A lease of `ttl` (whole seconds, at least 1: etcd's unit).
  absl::StatusOr<EtcdLease> GrantLease(absl::Duration ttl);
  // Renews the lease once; returns the TTL etcd gave it. NOT_FOUND if it has expired (or was
  // revoked): etcd answers a keep-alive of an unknown lease with a TTL of 0.
  absl::StatusOr<absl::Duration> KeepAliveOnce(int64_t lease);
  // Ends the lease and deletes every key under it. OK if it was already gone.
  absl::Status RevokeLease(int64_t lease);

  // The key's current value; NOT_FOUND if there is none. `revision` (may be null) receives
  // the store's revision at the read.
  absl::StatusOr<KeyValue> Get(const std::string& key, int64_t* revision = nullptr);
  // Every key starting with `prefix`, in key order.
  absl::StatusOr<std::vector<KeyValue>> GetPrefix(const std::string& prefix,
                                                  int64_t* revision = nullptr);
  // Writes the key (under `lease` unless 0); returns the revision of the write.
  absl::StatusOr<int64_t> Put(const std::string& key, const std::string& value, int64_t lease = 0);
  // Writes the key only if it does not exist: true if this call created it. Atomic (a Txn
  // comparing its create_revision with 0).
  absl::StatusOr<bool> CreateIfAbsent(const std::string& key, const std::string& value,
                                      int64_t lease = 0);
  // Writes the key only if its last write was at `mod_revision` (0: only if it does not
  // exist): true if it did. `lease` as for Put.
  absl::StatusOr<bool> PutIfModRevision(const std::string& key, const std::string& value,
                                        int64_t mod_revision, int64_t lease = 0);
  // Writes `key` only if `guard_key` exists and was created at `create_revision` (a term's
  // leader key): true if it did. A deposed primary's writes are refused this way.
  absl::StatusOr<bool> PutIfKeyCreatedAt(const std::string& guard_key, int64_t create_revision,
                                         const std::string& key, const std::string& value);
  // Creates `key` (under `lease`) only if it does not exist and `other_key` exists and was
  // created at `other_created_at`, deleting `other_key` in the same transaction: the create
  // revision of `key` if it did, 0 if not. An election's claim: the leader key taken and the
  // election's marker removed at once.
  absl::StatusOr<int64_t> CreateAndDelete(const std::string& key, const std::string& value,
                                          int64_t lease, const std::string& other_key,
                                          int64_t other_created_at);
  // A transaction of conditions that must all hold and writes done only then, at one revision.
  struct Condition {
    enum class Kind { kAbsent, kCreatedAt, kModifiedAt, kValueIs };
    std::string key;
    Kind kind = Kind::kAbsent;
    int64_t revision = 0;  // kCreatedAt, kModifiedAt (0: the key does not exist)
    std::string value;     // kValueIs
  };
  struct Write {
    std::string key;
    std::string value;
    int64_t lease = 0;
    bool erase = false;  // delete the key instead
  };
  // The transaction's revision if every condition held (and the writes were done), 0 if not.
  absl::StatusOr<int64_t> Commit(const std::vector<Condition>& conditions,
                                 const std::vector<Write>& writes);
  // Deletes the key only if its value is `value`: true if it did.
  absl::StatusOr<bool> DeleteIfValue(const std::string& key, const std::string& value);

  // Watches `key` (every key under it as a prefix if `prefix`) from `start_revision` (0: from
  // now). The watch holds a stream until it is destroyed.
  absl::StatusOr<std::unique_ptr<EtcdWatch>> Watch(const std::string& key, bool prefix,
                                                   int64_t start_revision);

  // The endpoint calls go to now.
  std::string current_endpoint();

 private:
  struct Endpoint {
    std::string address;
    size_t index = 0;  // in Channels::endpoints
    std::shared_ptr<grpc::Channel> channel;
    std::unique_ptr<etcdserverpb::KV::Stub> kv;
    std::unique_ptr<etcdserverpb::Lease::Stub> lease;
    std::unique_ptr<etcdserverpb::Watch::Stub> watch;
    std::unique_ptr<etcdserverpb::Auth::Stub> auth;
  };
  // A channel to each endpoint, made with the TLS files' contents `files`.
  struct Channels {
    std::vector<Endpoint> endpoints;
    EtcdTlsFiles files;
  };
  // The endpoint calls go to now, and the channels it belongs to, which the call keeps.
  struct Target {
    std::shared_ptr<const Channels> channels;
    const Endpoint* endpoint = nullptr;
  };

  static std::shared_ptr<const Channels> MakeChannels(const std::vector<std::string>& addresses,
                                                      EtcdTlsFiles files);
  EtcdClient(std::vector<std::string> addresses, std::shared_ptr<const Channels> channels,
             absl::Duration call_timeout, EtcdSecurity security);
  // The current endpoint, after making the channels anew if the TLS files changed since (read
  // at most once a reload_interval).
  Target Current();
  // Converts a call's status; a transport failure moves calls to the next endpoint, and a
  // refused token is dropped (the next call fetches another).
  absl::Status Checked(const Endpoint& endpoint, const grpc::Status& status,
                       const std::string& token);
  // Readies a call's context: its deadline (unless `deadline` is false: a watch lasts) and,
  // with a user, the token. `token` receives the token sent (empty without auth).
  absl::Status Prepare(const Endpoint& endpoint, grpc::ClientContext& context, bool deadline,
                       std::string& token);
  // The token to send, fetched from `endpoint` if there is none.
  absl::StatusOr<std::string> Token(const Endpoint& endpoint);
  // A call on the current endpoint, readied by Begin (Prepare with a deadline).
  struct Call {
    Target target;
    grpc::ClientContext context;
    std::string token;
    const Endpoint& endpoint() const { return *target.endpoint; }
  };
  absl::Status Begin(Call& call);
  // A unary call on the current endpoint: `rpc(endpoint, context)` is the stub's call. A
  // refused token is replaced and the call made once more.
  template <typename Rpc>
  absl::Status Unary(Rpc rpc);
  absl::StatusOr<etcdserverpb::TxnResponse> Txn(const etcdserverpb::TxnRequest& request);

  const std::vector<std::string> addresses_;
  const absl::Duration call_timeout_;
  const EtcdSecurity security_;
  std::atomic<size_t> current_{0};
  bloomsync::Mutex mu_;
  std::shared_ptr<const Channels> channels_ ABSL_GUARDED_BY(mu_);
  absl::Time next_file_check_ ABSL_GUARDED_BY(mu_);
  std::string token_ ABSL_GUARDED_BY(mu_);  // empty: none yet (or dropped)
};

}  // namespace coordination

#endif  // COORDINATION_ETCD_CLIENT_H_
