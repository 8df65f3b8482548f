// BloomService: bloom.v1.BloomFilterService over a storage::FilterStore.
//
// It validates what the store does not know about (batch and item limits, required fields,
// streaming order), converts messages, and turns every absl::Status into a grpc::Status with
// the same code. See protos/bloom/v1/bloom.proto for the contract.
//
// BloomCallbackService (callback_service.h) serves the handlers through gRPC's callback API.
// The streams are callback streams (pipeline.h, transfers.h).
//
// Thread-safety: every method is thread-safe; the store does the synchronisation.
#ifndef SERVICE_BLOOM_SERVICE_H_
#define SERVICE_BLOOM_SERVICE_H_

#include <atomic>
#include <cstddef>
#include <memory>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "bloom/v1/bloom.grpc.pb.h"
#include "metrics/metrics.h"
#include "service/auth.h"
#include "service/call_lane.h"
#include "service/direct_parse.h"
#include "service/forwarder.h"
#include "service/pipeline.h"
#include "service/shard_router.h"
#include "service/stream_proxy.h"
#include "service/transfer_guard.h"
#include "storage/filter_store.h"

namespace service {

class CallScope;  // call_scope.h

struct ServiceLimits {
  size_t max_batch = 100'000;        // items (plus raw_items) per Add/MightContain
  size_t max_item_bytes = 64 << 10;  // bytes per item
  // Operations a Pipeline stream reads ahead of its answers before it stops reading.
  size_t pipeline_window = 64;
  // Operations in one PipelineRequest (itself and its `more`); one with more is refused
  // before it is parsed (protos/wire/items_as_bytes.h). The clients pack at most 1 MiB of
  // operations into one message, under 100,000 of even the smallest.
  size_t max_pipeline_operations = 100'000;
  // Export and Import streams at once, in all and per client; how long one may go without
  // moving a chunk (zero: never), and the rate it must keep over that time, before it is
  // cancelled. See transfer_guard.h.
  size_t max_transfers = 16;
  size_t max_transfers_per_client = 4;
  absl::Duration transfer_idle_timeout = absl::Seconds(30);
  uint64_t transfer_min_bytes_per_second = 64 << 10;
};

// Optional collaborators; each may be null (then that feature is off). They must outlive the
// service.
struct ServiceHooks {
  // Token authentication: every call but health checking needs a token with the right role.
  const TokenAuthenticator* auth = nullptr;
  metrics::ServerMetrics* metrics = nullptr;
  // On a follower: the way to the primary, for writes and for reads asking for a sequence
  // not applied here in time (forwarder.h). Null on a primary.
  Forwarder* forwarder = nullptr;
  // In a sharded deployment (--shard_map): where calls for filters of other groups go
  // (shard_router.h). Null: every filter is this pod's.
  ShardRouter* router = nullptr;
};

// The streams (Pipeline, Export, Import) are callback streams: one needs no thread while it
// waits for its client. Pipeline reads and writes bytes (pipeline.h parses them). BloomService
// implements them and the unary handlers; gRPC serves BloomCallbackService (callback_service.h),
// which adds the unary calls on the callback API.
using StreamServiceBase = bloom::v1::BloomFilterService::WithRawCallbackMethod_Pipeline<
    bloom::v1::BloomFilterService::WithCallbackMethod_Export<
        bloom::v1::BloomFilterService::WithCallbackMethod_Import<
            bloom::v1::BloomFilterService::Service>>>;

// MightContainRequest.absent_if_missing, in one place for the unary call, its wire-read
// form and Pipeline: a check of a filter that does not exist answers NOT_FOUND, or, with
// absent_if_missing, "absent" for every item (nothing is created). `checked` is the store's
// answer for the items whose answers are `present`.
absl::Status AbsentIfMissing(absl::Status checked, bool absent_if_missing,
                             absl::Span<bool> present);

class BloomService final : public StreamServiceBase {
 public:
  // `store` must outlive the service.
  BloomService(storage::FilterStore* store, ServiceLimits limits, ServiceHooks hooks = {});

  grpc::ServerWriteReactor<bloom::v1::ExportChunk>* Export(
      grpc::CallbackServerContext* context, const bloom::v1::ExportRequest* request) override;
  grpc::ServerReadReactor<bloom::v1::ImportChunk>* Import(
      grpc::CallbackServerContext* context, bloom::v1::ImportResponse* response) override;

  // The unary handlers. BloomCallbackService serves Reserve, Stats, Delete and List through
  // these, and item_calls.h serves Add and MightContain through their wire-read forms below
  // (HandleAddItems...); HandleAdd and HandleMightContain take the messages for in-process
  // callers (tests, fuzzing) and serve them through those same forms. `context` gives the call's
  // metadata (the token) and deadline; null for in-process calls, which then carry no token.
  // They answer from this pod's store: a read's min_sequence is for their callers to honour
  // first (WhenApplied, below).
  //
  // How a handler that may answer later (from another thread) answers: exactly once.
  using Finish = absl::AnyInvocable<void(grpc::Status) &&>;

  // Reserve, Delete, Merge and Remove answer through `finish`: at once on this thread, or,
  // when the write must wait to be acknowledged (followers' acknowledgements with
  // --min_replica_acks, the fence, and for Remove the fsync with --sync), from the thread that
  // acknowledges it; no thread waits meanwhile. `request` and `response` must stay valid until
  // then. The forms without `finish` wait for it, for in-process callers.
  void HandleReserveThen(const bloom::v1::ReserveRequest& request,
                         bloom::v1::ReserveResponse* response, grpc::ServerContextBase* context,
                         Finish finish);
  void HandleDeleteThen(const bloom::v1::DeleteRequest& request,
                        bloom::v1::DeleteResponse* response, grpc::ServerContextBase* context,
                        Finish finish);
  void HandleMergeThen(const bloom::v1::MergeRequest& request, bloom::v1::MergeResponse* response,
                       grpc::ServerContextBase* context, Finish finish);
  grpc::Status HandleReserve(const bloom::v1::ReserveRequest& request,
                             bloom::v1::ReserveResponse* response,
                             grpc::ServerContextBase* context = nullptr);
  grpc::Status HandleAdd(const bloom::v1::AddRequest& request, bloom::v1::AddResponse* response,
                         grpc::ServerContextBase* context = nullptr);
  grpc::Status HandleMightContain(const bloom::v1::MightContainRequest& request,
                                  bloom::v1::MightContainResponse* response,
                                  grpc::ServerContextBase* context = nullptr);
  grpc::Status HandleStats(const bloom::v1::StatsRequest& request,
                           bloom::v1::StatsResponse* response,
                           grpc::ServerContextBase* context = nullptr);
  grpc::Status HandleDelete(const bloom::v1::DeleteRequest& request,
                            grpc::ServerContextBase* context = nullptr);
  grpc::Status HandleMerge(const bloom::v1::MergeRequest& request,
                           bloom::v1::MergeResponse* response,
                           grpc::ServerContextBase* context = nullptr);
  grpc::Status HandleList(const bloom::v1::ListRequest& request, bloom::v1::ListResponse* response,
                          grpc::ServerContextBase* context = nullptr);
  // The shard map this pod holds (an empty one, version 0, when it is not sharded).
  grpc::Status HandleGetShardMap(const bloom::v1::GetShardMapRequest& request,
                                 bloom::v1::GetShardMapResponse* response,
                                 grpc::ServerContextBase* context = nullptr);
  // CUCKOO filters only (FAILED_PRECONDITION for a BLOOM filter).
  void HandleRemoveThen(const bloom::v1::RemoveRequest& request,
                        bloom::v1::RemoveResponse* response, grpc::ServerContextBase* context,
                        Finish finish);
  grpc::Status HandleRemove(const bloom::v1::RemoveRequest& request,
                            bloom::v1::RemoveResponse* response,
                            grpc::ServerContextBase* context = nullptr);
  grpc::Status HandleCount(const bloom::v1::CountRequest& request,
                           bloom::v1::CountResponse* response,
                           grpc::ServerContextBase* context = nullptr);

  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* Pipeline(
      grpc::CallbackServerContext* context) override;

  // Admits a stream (not draining, deadline ahead, a valid token from its metadata, with the
  // role `rpc` needs: Pipeline and Export read, Import write) and returns the caller, whose
  // role each Pipeline operation is checked against. A refusal is counted and logged like a
  // refused call.
  absl::StatusOr<Caller> AdmitStream(grpc::ServerContextBase* context,
                                     rpcs::Rpc rpc = rpcs::Rpc::kPipeline);
  // A follower's stream to proxy to the primary, admitted here first (so that one refused costs
  // the primary nothing; the primary checks the token again): its ClientKey, or the refusal.
  absl::StatusOr<std::string> ProxyClient(grpc::CallbackServerContext* context, rpcs::Rpc rpc);
  TransferGuard& transfers() { return transfers_; }
  // Where List and Stats run, off gRPC's threads (call_lane.h).
  CallLane& admin_lane() { return admin_lane_; }
  bool draining() const { return draining_.load(); }
  // Counts a call refused for its token (bloom_auth_failures_total) and logs it, at most one
  // log line a second. Used by the handlers and by the transport's TokenGate.
  void RecordAuthRefusal(const absl::Status& status, absl::string_view method,
                         absl::string_view peer);
  const ServiceLimits& limits() const { return limits_; }
  storage::FilterStore* store() const { return store_; }
  // Checks the batch limits of an Add/MightContainRequest and appends its items, then its
  // raw_items, to `items` as views into the request.
  template <typename Request>
  absl::Status CollectItems(const Request& request, std::vector<absl::string_view>& items) const;
  // The batch limits of one request's items: the first `text_items` came from `items`, the
  // rest from `raw_items` (error messages name the field and index).
  absl::Status CheckItems(absl::Span<const absl::string_view> items, size_t text_items) const;
  // As CollectItems, for a request read as views (direct_parse.h).
  absl::Status CollectItems(const ItemsRequestView& request,
                            std::vector<absl::string_view>& items) const;
  // An AddRequest's create_if_missing (nullopt: none); INVALID_ARGUMENT if it does not parse.
  static absl::StatusOr<absl::optional<bloom::FilterParams>> CreateSpecOf(
      const ItemsRequestView& request);

  // Add and MightContain read from the wire (direct_parse.h), for item_calls.h (either API):
  // `answers` (request.items.size() bools, in the response being written) gets one value per
  // item of `request`.
  //
  // An Add is served through the store's group committer (storage/write/group_commit.h): the adds
  // of calls that arrive together share one RocksDB write, and with --sync one fsync, and no
  // thread waits for another's. `finish` gets the call's status once the add is acknowledged:
  // at once on this thread if it is refused or served here, else on the thread that served it
  // (another call's, or the WAL syncer's). `request`'s bytes and `answers` must stay valid
  // until then. The call counts as in flight (Drain) until then.
  void HandleAddItemsGrouped(const ItemsRequestView& request, bool* answers,
                             grpc::ServerContextBase* context,
                             absl::AnyInvocable<void(grpc::Status) &&> finish);
  // HandleAddItemsGrouped, waiting for `finish`: for in-process callers (fuzzing).
  grpc::Status HandleAddItems(const ItemsRequestView& request, bool* answers,
                              grpc::ServerContextBase* context);
  grpc::Status HandleMightContainItems(const ItemsRequestView& request, bool* answers,
                                       grpc::ServerContextBase* context);
  const ServiceHooks& hooks() const { return hooks_; }
  // In a sharded deployment (hooks().router), what serves filters of this pod's group only
  // (`what`: "a Pipeline stream", "Export", "Import"): UNAVAILABLE naming the owning group if
  // another group owns `name`'s slot, so that a client routing by the shard map sends it there
  // (after fetching the map again). OK when not sharded.
  // `rpc` says whether it writes (refused while the filter's slot is paused in a move);
  // `context` (may be null) may carry a slot mover's header.
  absl::Status CheckOwnedHere(absl::string_view name, absl::string_view what, rpcs::Rpc rpc,
                              const grpc::ServerContextBase* context = nullptr) const;
  // In a sharded deployment, `finish` of a write to `names` served here, checked first by
  // ShardRouter::SettleWrite (an OK answer becomes UNAVAILABLE if the filter's slot began
  // moving while the write ran); `finish` itself when not sharded.
  Finish SettledWrite(absl::Span<const absl::string_view> names,
                      const grpc::ServerContextBase* context, Finish finish) const;
  // Read-your-writes (bloom.v1 min_sequence): done(true) once this server has applied
  // `min_sequence`, at once on this thread on a primary (and on a follower that has applied
  // it); a follower waits for it a while without holding a thread (Forwarder::WhenApplied),
  // and done(false) means: forward the read to the primary.
  void WhenApplied(uint64_t min_sequence, const grpc::ServerContextBase* context,
                   absl::AnyInvocable<void(bool applied) &&> done) {
    if (hooks_.forwarder == nullptr) {
      std::move(done)(true);
    } else {
      hooks_.forwarder->WhenApplied(min_sequence, context, std::move(done));
    }
  }

  // Graceful shutdown, step 1: from now on new calls are refused with UNAVAILABLE (clients
  // retry them elsewhere), Pipeline streams answer the operations they have read and end with
  // UNAVAILABLE, and this waits until the calls and streams have finished, or until
  // `deadline`. Returns whether they all finished.
  bool Drain(absl::Time deadline);

 private:
  friend class CallScope;

  // Merge and Reserve `like` naming filters other groups own (cross_group.cc): true when the
  // call is theirs, and then `finish` is taken (answered from the admin lane).
  bool ServeReserveLikeAcrossGroups(const bloom::v1::ReserveRequest& request,
                                    bloom::v1::ReserveResponse* response,
                                    grpc::ServerContextBase* context, Finish& finish);
  bool ServeMergeAcrossGroups(const bloom::v1::MergeRequest& request,
                              bloom::v1::MergeResponse* response, grpc::ServerContextBase* context,
                              Finish& finish);
  // Reserve's and Merge's answers, once the write is acknowledged (AnswerOnceAcknowledged).
  void AnswerReserve(std::unique_ptr<CallScope> log,
                     absl::StatusOr<storage::FilterStore::ReserveResult> result,
                     bloom::v1::ReserveResponse* response, Finish finish);
  void AnswerMerge(std::unique_ptr<CallScope> log, absl::StatusOr<storage::FilterInfo> merged,
                   bloom::v1::MergeResponse* response, Finish finish);
  // Runs `serve` on the admin lane with `finish` (RESOURCE_EXHAUSTED at once when it is full).
  void PostToAdminLane(absl::AnyInvocable<void(Finish) &&> serve, Finish& finish);

  storage::FilterStore* const store_;
  const ServiceLimits limits_;
  const ServiceHooks hooks_;
  std::atomic<bool> draining_{false};
  std::atomic<int64_t> last_auth_log_micros_{0};  // auth failures are logged at most 1/s
  std::atomic<int> in_flight_{0};
  PipelineStreams pipelines_;
  // A follower's streams to the primary (stream_proxy.h); shared, as a proxy may end after this.
  const std::shared_ptr<ProxiedStreams> proxied_ = std::make_shared<ProxiedStreams>();
  TransferGuard transfers_;
  // Declared last: destroyed first, it runs what is queued while the rest is still there.
  CallLane admin_lane_;
};

}  // namespace service

#endif  // SERVICE_BLOOM_SERVICE_H_
