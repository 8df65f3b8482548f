// ShardRouter: where a call for a filter goes in a sharded deployment (--shard_map). Each
// filter's slot (common/slot.h) is owned by one group at the shard map's version this pod
// holds (sharding/shard_view.h); a pod never serves a filter its group does not own:
//
// - a call for a filter of this pod's group is served here (or, on a follower, as a follower
//   serves any call: forwarder.h);
// - a call for another group's filter is forwarded there, one hop: a write, and a read asking
//   for a min_sequence, to that group's primary; another read to one of its members in turn. The
//   caller gets the owner's status and answer, and the header `bloom-shard-map-version` (the
//   version this pod holds), which tells a client routing by its own copy of the map that it sent
//   the call to the wrong group;
// - while slots move (sharding/shard_map.h's SlotMove), writes to them are refused UNAVAILABLE
//   everywhere once the move is paused, until the map names their new owner; the mover's own
//   calls (kShardMoveHeader) reach the target group's copies;
// - a call forwarded here by another pod (it carries `bloom-shard-hop`, with the version the
//   sender held) for a filter this pod's group does not own either (the two pods hold
//   different versions, for the moment a change takes to reach every pod) goes on to the owner
//   if this pod holds a newer version than the sender's (each hop's version is newer than the
//   last, so no call loops), and is refused UNAVAILABLE naming both versions otherwise, which
//   clients retry;
// - a forwarded read the owner answers UNAVAILABLE (every member tried) is sent again after a
//   short wait, for up to `read_retry_budget`: the owner's pods may hold an older map than this
//   pod for the moment a change takes to reach them (at a move's flip, the target's pods refuse
//   the reads the old owner's pods send them), or its primary may be changing. Reads change
//   nothing, so sending one twice is safe; a write is not sent again (it may have been made),
//   and its UNAVAILABLE goes to the client, which retries it.
//
//   ShardRouter router(view, connect);
//   ShardRouter::Decision route = router.Decide(rpcs::Info(rpcs::Rpc::kAdd), {name}, context);
//   if (!route.here) router.Forward(context, route, info.path, request, response, done);
//
// Thread-safety: thread-safe.
#ifndef SERVICE_SHARD_ROUTER_H_
#define SERVICE_SHARD_ROUTER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "bloom/v1/bloom.pb.h"
#include "common/blocking_mutex.h"
#include "common/rpcs.h"
#include "google/protobuf/message.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "metrics/metrics.h"
#include "service/stream_connections.h"
#include "sharding/shard_view.h"

namespace service {

// The header a forwarded call carries (the sending pod's map version), and the one its answer
// carries back to the client.
inline constexpr char kShardHopHeader[] = "bloom-shard-hop";
inline constexpr char kShardMapVersionHeader[] = "bloom-shard-map-version";
// The header of a slot mover's own calls (bloom-cli cluster move): the target group of a move
// serves them for the moving slots, and any group serves its Delete of a filter whose slot it
// does not own (the copies left behind by a move).
inline constexpr char kShardMoveHeader[] = "bloom-shard-move";

class ShardRouter {
 public:
  // How long a forwarded read is sent again while the owner answers UNAVAILABLE: longer than
  // a map change takes to reach every pod, and than a primary's failover.
  static constexpr absl::Duration kReadRetryBudget = absl::Seconds(3);

  // `view` must outlive the router, and the router the calls it forwards. `connect` opens a
  // channel to a pod of another group.
  ShardRouter(const sharding::ShardView* view, StreamConnections::Connect connect,
              absl::Duration read_retry_budget = kReadRetryBudget);

  struct Decision {
    bool here = true;         // serve it on this pod
    grpc::Status refusal;     // not OK: answer this instead
    std::string address;      // where to forward it (when neither)
    std::string group;        // the group it goes to
    uint64_t version = 0;     // the map's version the decision read
    bool any_member = false;  // a read that any of the group's pods may answer
    bool read = false;        // changes nothing: Forward may send it again (see above)
  };
  // Where a call of `info` naming `names` (one filter, or a Merge's target and sources) goes.
  // Filters of different groups in one call are refused (FAILED_PRECONDITION naming them). A
  // read with `fresh_read` (it asks for a min_sequence: sequences are each group's own) goes
  // to the owner's primary, which holds every sequence of its group.
  Decision Decide(const rpcs::RpcInfo& info, absl::Span<const absl::string_view> names,
                  const grpc::ServerContextBase* caller, bool fresh_read = false);
  // After a write served here was applied, before it is acknowledged: OK if this pod's group
  // still owns the slot of each of `names` and writes to it are not paused; otherwise
  // UNAVAILABLE (the write may or may not stay: retry it; a mover's own calls are always OK).
  // Why: a write admitted just before this pod took a map pausing its slot may be applied after
  // the mover, which waits only until every pod holds that map, copied the slot's last changes.
  // A write that passes this check was applied before this pod took the pause, so before that
  // copy read its filter: no acknowledged write is left behind at the old owner.
  absl::Status SettleWrite(absl::Span<const absl::string_view> names,
                           const grpc::ServerContextBase* caller) const;
  // Called by each SettleWrite that passes, with each filter's slot and the map version it
  // was settled under (--ack_log records them). Set before the router serves a call.
  using SettledObserver = std::function<void(uint32_t slot, uint64_t version)>;
  void ObserveSettled(SettledObserver observer) { on_settled_ = std::move(observer); }
  // A call to any pod of `group` (`primary`: its primary), as `state` says where it is. Set
  // the decision's `read` for a call that changes nothing.
  Decision ToGroup(const sharding::ShardState& state, const std::string& group, bool primary);
  // Whether another pod forwarded the call here (it carries kShardHopHeader).
  static bool ForwardedByAPod(const grpc::ServerContextBase* caller);
  // Whether the call is a slot mover's (it carries kShardMoveHeader).
  static bool MoverCall(const grpc::ServerContextBase* caller);

  // How a forwarded call answers its caller.
  enum class Answer {
    kCall,       // the caller's own call: its answer carries kShardMapVersionHeader
    kOperation,  // one operation of the caller's stream, whose headers went long ago
  };
  // Forwards a unary call as Decide said: `done` gets the owner's status, and `response` its
  // answer. `request` and `response` must stay valid until `done`. The caller's token goes with
  // it, and its deadline bounded to a minute. A read that any member may answer goes to the
  // next member (or the primary) if the one it went to answers UNAVAILABLE: a member killed,
  // restarting or changing role fails no read while another is up. A read every member
  // refused is sent again after a wait (the header comment says why).
  void Forward(grpc::ServerContextBase* caller, const Decision& decision, const char* method,
               const grpc::ByteBuffer& request, grpc::ByteBuffer* response,
               std::function<void(grpc::Status)> done, Answer answer = Answer::kCall);
  // As Forward, for a call whose messages are protobuf objects.
  void ForwardMessage(grpc::ServerContextBase* caller, const Decision& decision, const char* method,
                      const google::protobuf::Message& request, google::protobuf::Message* response,
                      std::function<void(grpc::Status)> done, Answer answer = Answer::kCall);

  // Whether this pod's group owns `name`'s slot in the map it holds.
  bool OwnedHere(absl::string_view name) const;
  // For a call served here that also names filters of other groups (Merge's sources, Reserve's
  // `like`): streams the dump of `name` from its group's primary (Export, with the caller's
  // token and deadline) into `sink`, chunk by chunk, on the calling thread. A sink's error ends
  // the export and is answered (kEnough: OK, the sink needs no more).
  static constexpr absl::StatusCode kEnough = absl::StatusCode::kCancelled;
  absl::Status ExportFromOwner(absl::string_view name, grpc::ServerContextBase* caller,
                               const std::function<absl::Status(absl::string_view)>& sink);

  // Cancels the calls forwarded and not yet answered (their callers get UNAVAILABLE, and
  // retry): a server shutting down or changing role must not wait on another group's pod that
  // stopped answering. Later calls are forwarded as before (the router outlives the server).
  void CancelInFlight();

  // GetShardMap's answer: the map this pod holds and where each group is reached.
  bloom::v1::GetShardMapResponse Describe() const;
  // What metrics report: the map held, the calls forwarded and refused so far, and slot
  // moves: their pauses, and what movers copied here (counted by the Import and ApplyJournal
  // handlers through these).
  metrics::ShardFigures Figures() const;
  void CountMoveCopy(uint64_t bytes) { move_bytes_copied_.fetch_add(bytes); }
  void CountMoveCatchUp(uint64_t items) { move_items_caught_up_.fetch_add(items); }
  const sharding::ShardView& view() const { return *view_; }

 private:
  struct Peer {
    explicit Peer(std::shared_ptr<grpc::Channel> to) : channel(std::move(to)), stub(channel) {}
    std::shared_ptr<grpc::Channel> channel;
    grpc::GenericStub stub;
  };
  // The connection to the decision's address (counted as forwarded to its group).
  std::shared_ptr<Peer> PeerAt(const Decision& decision);
  // One forwarded call on its way: where it goes now and what is left to try.
  struct Attempt {
    grpc::ServerContextBase* caller;
    Decision decision;
    const char* method;
    const grpc::ByteBuffer* request;
    grpc::ByteBuffer* response;
    std::function<void(grpc::Status)> done;
    size_t tries = 0;                               // members left for a read refused by one
    absl::Time retry_until = absl::InfinitePast();  // a read refused by all is sent until then
    absl::Duration wait = absl::ZeroDuration();     // before it is sent again
    uint64_t cancellations = 0;                     // CancelInFlight's count when it began
  };
  // Forward's call to one pod.
  void ForwardTo(Attempt attempt);
  // Sends a read every member refused again after a wait, to the group's members as `view_`
  // says then; answers UNAVAILABLE if CancelInFlight ran meanwhile.
  void RetryLater(Attempt attempt);
  // The members of `group` a read may try after the first (each other member, then the primary).
  size_t MembersAfterTheFirst(const std::string& group) const;

  const sharding::ShardView* const view_;
  const StreamConnections::Connect connect_;
  const absl::Duration read_retry_budget_;
  SettledObserver on_settled_;
  // Counts a refusal.
  Decision Refused(Decision decision);

  std::atomic<uint64_t> next_member_{0};    // reads go to a group's members in turn
  std::atomic<uint64_t> cancellations_{0};  // CancelInFlight's calls: cuts the reads waiting
  std::atomic<uint64_t> refused_{0};
  std::atomic<uint64_t> move_bytes_copied_{0};
  std::atomic<uint64_t> move_items_caught_up_{0};
  mutable bloomsync::BlockingMutex mu_;
  std::map<std::string, std::shared_ptr<Peer>> peers_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, uint64_t> forwarded_ ABSL_GUARDED_BY(mu_);  // by group
  // The calls forwarded and not yet answered, and whether CancelInFlight cut them.
  std::map<std::shared_ptr<grpc::ClientContext>, bool> in_flight_ ABSL_GUARDED_BY(mu_);
};

}  // namespace service

#endif  // SERVICE_SHARD_ROUTER_H_
