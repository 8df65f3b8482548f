// ServerMetrics: bloom-server's Prometheus metrics, served as text on http://<listen>/metrics.
//
//   absl::StatusOr<std::unique_ptr<ServerMetrics>> metrics = ServerMetrics::Create(store);
//   (*metrics)->Serve("0.0.0.0:9090");                    // optional: Render() works without
//   (*metrics)->RecordRpc(rpcs::Rpc::kAdd, absl::StatusCode::kOk, latency, items);
//
// Two kinds of figures:
// - events, counted as they happen (RecordRpc, RecordAuthFailure): bloom_rpc_requests_total,
//   bloom_rpc_duration_seconds, bloom_items_added_total, bloom_items_checked_total,
//   bloom_auth_failures_total;
// - state, read at scrape time from the store, RocksDB and /proc: bloom_filters,
//   bloom_filter_memory_bytes, bloom_journal_pending_bytes, bloom_checkpoint_lag_seconds,
//   bloom_rocksdb_*, process_* (the standard names Prometheus client libraries use).
// docs/operations.md (Observability) lists every metric.
//
// Thread-safety: every method is thread-safe. RecordRpc is on the request path: after the
// first call per (method, code) it takes no lock but prometheus-cpp's per-histogram one.
#ifndef METRICS_METRICS_H_
#define METRICS_METRICS_H_

#include <array>
#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/rpcs.h"
#include "storage/store_figures.h"

namespace prometheus {
class Collectable;
class Counter;
class Exposer;
class Gauge;
class Histogram;
class Registry;
template <typename T>
class Family;
}  // namespace prometheus

namespace metrics {

// Replication figures, read at scrape time from the follower or the primary's replication
// service (main() provides them: metrics sits below both).
struct ReplicationFigures {
  bool follower = false;
  // A follower's: whether its stream to the primary is up, what it has applied, the primary's
  // latest as last heard, and how far behind the primary's clock its data is.
  bool connected = false;
  uint64_t applied_sequence = 0;
  uint64_t primary_sequence = 0;
  absl::Duration lag;
  size_t reads_waiting = 0;  // for a sequence not applied yet (min_sequence, read your writes)
  // A primary's: its followers' streams, and writes that failed for want of acknowledgements.
  struct Follower {
    std::string name;
    uint64_t sent_sequence = 0;
    uint64_t durable_sequence = 0;
  };
  std::vector<Follower> followers;
  uint64_t latest_sequence = 0;
  uint64_t ack_timeouts = 0;
  size_t writes_waiting_acks = 0;  // writes waiting now for --min_replica_acks followers
  // With failover through etcd: the current term and, on the primary, its sync set's size
  // (elected false: no etcd).
  bool elected = false;
  int64_t term = 0;
  size_t sync_set_size = 0;
};

// A sharded pod's figures (--shard_map), read at scrape time from its shard router.
struct ShardFigures {
  std::string group;         // this pod's
  uint64_t map_version = 0;  // 0: no map read yet
  size_t groups = 0;
  uint32_t slots = 0;        // the deployment's slot count
  uint32_t slots_owned = 0;  // by this pod's group
  // Calls forwarded to each other group, and calls refused (no map yet, no pod up in the
  // owner's group, or forwarded here by a pod holding another version).
  std::vector<std::pair<std::string, uint64_t>> forwarded;
  uint64_t refused = 0;
  // Slot moves, as this pod sees them: one in the map; its writes paused, and for how long so
  // far; the pauses that ended, and their total length; what movers copied into this pod
  // (Import, whole filters) and caught up here (ApplyJournal: item hashes, cuckoo slot changes).
  bool moving = false;
  bool writes_paused = false;
  double paused_seconds = 0;
  uint64_t pauses_ended = 0;
  double paused_seconds_total = 0;
  uint64_t move_bytes_copied = 0;
  uint64_t move_items_caught_up = 0;
};

class ServerMetrics {
 public:
  // `store` (may be null in tests) must outlive the metrics.
  static std::unique_ptr<ServerMetrics> Create(storage::FiguresSource* store);
  ~ServerMetrics();
  ServerMetrics(const ServerMetrics&) = delete;
  ServerMetrics& operator=(const ServerMetrics&) = delete;

  // Serves GET /metrics on `listen` ("host:port"; port 0 picks one, see port()). UNAVAILABLE
  // if the address cannot be bound. Call at most once.
  absl::Status Serve(const std::string& listen);
  int port() const { return port_; }

  // One finished call: its status code and latency; `items` counts toward items added (Add)
  // or checked (MightContain) when the call succeeded.
  void RecordRpc(rpcs::Rpc rpc, absl::StatusCode code, absl::Duration latency, size_t items);
  // A call refused by token authentication (UNAUTHENTICATED or PERMISSION_DENIED).
  void RecordAuthFailure(absl::StatusCode code);

  // An Export or Import stream began, or ended (`abandoned`: cancelled for idling).
  void RecordTransferStart(bool import);
  void RecordTransferEnd(bool import, bool abandoned);

  // The store scrapes read, replaced (a follower that copied a snapshot again opened a new
  // one); null: none.
  void SetStore(storage::FiguresSource* store);
  // Where scrapes read replication figures from; unset: none reported.
  void SetReplicationSource(std::function<ReplicationFigures()> source);
  // Where scrapes read a sharded pod's figures from; unset: none reported.
  void SetShardSource(std::function<ShardFigures()> source);
  // The certificates this server presents or checks against, read at each scrape: a name
  // ("server", "client_ca", ...) and when it expires; none without TLS.
  using CertificateExpiries = std::vector<std::pair<std::string, absl::Time>>;
  void SetCertificateSource(std::function<CertificateExpiries()> source);

  // Everything in the Prometheus text format, as a scrape would return it.
  std::string Render() const;

 private:
  explicit ServerMetrics(storage::FiguresSource* store);
  prometheus::Counter& RequestCounter(rpcs::Rpc rpc, absl::StatusCode code);

  std::shared_ptr<prometheus::Registry> registry_;
  std::shared_ptr<prometheus::Collectable> state_;  // reads the store, RocksDB and /proc
  prometheus::Family<prometheus::Counter>* requests_;
  std::array<prometheus::Histogram*, rpcs::kNumRpcs> durations_{};
  // Series of requests_ by [rpc][code], created on first use (Family::Add locks).
  static constexpr size_t kNumCodes = 17;
  std::array<std::array<std::atomic<prometheus::Counter*>, kNumCodes>, rpcs::kNumRpcs>
      request_series_{};
  prometheus::Counter* items_added_;
  prometheus::Counter* items_checked_;
  prometheus::Counter* unauthenticated_;
  prometheus::Counter* permission_denied_;
  std::array<prometheus::Gauge*, 2> transfers_in_progress_{};  // [export, import]
  std::array<prometheus::Counter*, 2> transfers_abandoned_{};
  std::unique_ptr<prometheus::Exposer> exposer_;
  int port_ = 0;
};

}  // namespace metrics

#endif  // METRICS_METRICS_H_
