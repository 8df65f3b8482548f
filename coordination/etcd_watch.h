// EtcdWatch: one etcd watch stream (EtcdClient::Watch opens it, etcd_client.h), whose Next()
// blocks for the next batch of changes.
//
//   ASSIGN_OR_RETURN(std::unique_ptr<EtcdWatch> watch, etcd->Watch("c1/leader", false, rev));
//   for (;;) { ASSIGN_OR_RETURN(std::vector<WatchEvent> events, watch->Next()); ... }
//
// The stream runs on gRPC's callback API: etcd's answers arrive on gRPC's own threads, which
// queue them for Next(). A thread blocked in a synchronous Read would instead sit in gRPC's
// poller, which (gRPC's epoll engine has one epoll set per process) also takes the socket
// events of a server in the same process and hands them on, spending the pod's CPU on
// wake-ups and hand-offs under load (a sharded pod watches its leader and its shard map).
//
// Thread-safety: Next() is called by one thread at a time; Cancel() by any thread at any time.
#ifndef COORDINATION_ETCD_WATCH_H_
#define COORDINATION_ETCD_WATCH_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "etcd/etcdserver/etcdserverpb/rpc.grpc.pb.h"
#include "grpcpp/grpcpp.h"

namespace coordination {

struct KeyValue {
  std::string key;
  std::string value;
  int64_t create_revision = 0;
  int64_t mod_revision = 0;
  int64_t lease = 0;
};

// One change a watch saw.
struct WatchEvent {
  enum class Type { kPut, kDelete };
  Type type = Type::kPut;
  KeyValue kv;  // for a delete: the key and the revision of the delete
};

// etcd's record of a key as ours (for EtcdClient's reads too).
KeyValue FromProto(const mvccpb::KeyValue& kv);

class EtcdWatch {
 public:
  ~EtcdWatch();  // cancels the stream and waits until gRPC is done with it
  EtcdWatch(const EtcdWatch&) = delete;
  EtcdWatch& operator=(const EtcdWatch&) = delete;

  // The next events (at least one), or an error when the stream ends: UNAVAILABLE if etcd
  // went away, OUT_OF_RANGE if `start_revision` was compacted (re-read, then watch again),
  // CANCELLED after Cancel().
  absl::StatusOr<std::vector<WatchEvent>> Next();
  // Ends a Next() blocked on another thread.
  void Cancel();

 private:
  friend class EtcdClient;
  class Stream;  // the call's reactor (etcd_watch.cc)

  EtcdWatch();
  // Starts the call on `stub`, whose context_ the caller prepared, with `create`, and waits
  // for etcd's first answer: true with it in `created`, or false with the ended call's status
  // in `failure`.
  bool Start(etcdserverpb::Watch::Stub& stub, const etcdserverpb::WatchRequest& create,
             etcdserverpb::WatchResponse& created, grpc::Status& failure);

  std::string endpoint_;
  std::shared_ptr<const void> channels_;  // the stream's channel stays while it lasts
  grpc::ClientContext context_;
  std::unique_ptr<Stream> stream_;  // null until Start
};

}  // namespace coordination

#endif  // COORDINATION_ETCD_WATCH_H_
