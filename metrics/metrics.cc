#include "metrics/metrics.h"

#include <prometheus/collectable.h>
#include <prometheus/counter.h>
#include <prometheus/exposer.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <exception>
#include <sstream>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "common/blocking_mutex.h"
#include "metrics/process_figures.h"

namespace metrics {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

MetricFamily Single(std::string name, std::string help, MetricType type, double value) {
  ClientMetric metric;
  if (type == MetricType::Counter) {
    metric.counter.value = value;
  } else {
    metric.gauge.value = value;
  }
  return MetricFamily{std::move(name), std::move(help), type, {std::move(metric)}};
}

MetricFamily Gauge(std::string name, std::string help, double value) {
  return Single(std::move(name), std::move(help), MetricType::Gauge, value);
}

MetricFamily Counter(std::string name, std::string help, double value) {
  return Single(std::move(name), std::move(help), MetricType::Counter, value);
}

// The figures that are state rather than events, read when Prometheus scrapes.
class StateCollector final : public prometheus::Collectable {
 public:
  explicit StateCollector(storage::FiguresSource* store) : store_(store) {}

  [[nodiscard]] std::vector<MetricFamily> Collect() const override {
    std::vector<MetricFamily> families;
    bloomsync::BlockingLock lock(&mu_);
    if (store_ != nullptr) AddStore(families);
    if (replication_) AddReplication(replication_(), families);
    if (shards_) AddShards(shards_(), families);
    if (certificates_) AddCertificates(certificates_(), families);
    AddProcess(families);
    return families;
  }

  void SetStore(storage::FiguresSource* store) {
    bloomsync::BlockingLock lock(&mu_);
    store_ = store;
  }
  void SetReplicationSource(std::function<ReplicationFigures()> source) {
    bloomsync::BlockingLock lock(&mu_);
    replication_ = std::move(source);
  }
  void SetShardSource(std::function<ShardFigures()> source) {
    bloomsync::BlockingLock lock(&mu_);
    shards_ = std::move(source);
  }
  void SetCertificateSource(std::function<ServerMetrics::CertificateExpiries()> source) {
    bloomsync::BlockingLock lock(&mu_);
    certificates_ = std::move(source);
  }

 private:
  void AddStore(std::vector<MetricFamily>& out) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const storage::StoreFigures f = store_->Figures();
    out.push_back(Gauge("bloom_filters", "Filters in memory.", static_cast<double>(f.filters)));
    out.push_back(Gauge("bloom_filters_cold",
                        "Filters on disk only (evicted under --memory_limit, or left there at "
                        "start-up); loaded again on their next use.",
                        static_cast<double>(f.cold_filters)));
    out.push_back(Counter("bloom_filter_evictions_total",
                          "Filters written out and freed to keep memory under --memory_limit.",
                          static_cast<double>(f.evictions)));
    out.push_back(Counter("bloom_filter_loads_total",
                          "Cold filters loaded from disk on use (misses of the filter cache).",
                          static_cast<double>(f.loads)));
    out.push_back(Counter("bloom_filter_load_seconds_total", "Time spent loading cold filters.",
                          absl::ToDoubleSeconds(f.load_time)));
    MetricFamily unavailable{"bloom_filters_unavailable",
                             "Filters that cannot be used, by reason: unreadable (DATA_LOSS) or "
                             "not_loaded (larger than the whole --memory_limit; "
                             "RESOURCE_EXHAUSTED until a restart with a larger limit).",
                             MetricType::Gauge,
                             {}};
    for (const auto& [reason, count] : {std::pair{"unreadable", f.unreadable_filters},
                                        std::pair{"not_loaded", f.unloaded_filters}}) {
      ClientMetric metric;
      metric.label = {{"reason", reason}};
      metric.gauge.value = static_cast<double>(count);
      unavailable.metric.push_back(std::move(metric));
    }
    out.push_back(std::move(unavailable));
    out.push_back(Gauge("bloom_orphans_deleted_at_start",
                        "Pages and journal records that belonged to no filter (left by a crash "
                        "during an Import or a Delete), deleted when the server started.",
                        static_cast<double>(f.orphans_deleted_at_start)));
    out.push_back(
        Gauge("bloom_filter_memory_bytes",
              "Bytes of resident filters: bits plus bookkeeping (what --memory_limit limits).",
              static_cast<double>(f.memory_used_bytes)));
    out.push_back(
        Gauge("bloom_memory_limit_bytes",
              "The --memory_limit for resident filters (bits plus bookkeeping) in bytes; 0 means "
              "no limit.",
              static_cast<double>(f.memory_limit_bytes)));
    if (f.disk_size_bytes > 0) {
      out.push_back(Gauge("bloom_data_dir_size_bytes",
                          "The size of the file system holding the data dir.",
                          static_cast<double>(f.disk_size_bytes)));
      out.push_back(Gauge("bloom_data_dir_free_bytes",
                          "Bytes free to this server on the file system holding the data dir.",
                          static_cast<double>(f.disk_free_bytes)));
    }
    out.push_back(Gauge("bloom_shard_move_journal_held_filters",
                        "Filters whose journal a slot move out of this pod holds (it copies them "
                        "elsewhere and catches the copies up from their journals).",
                        static_cast<double>(f.journal_held_filters)));
    out.push_back(Gauge("bloom_shard_move_journal_lag_records",
                        "Journal records written to those filters since the mover last read "
                        "them: what its next catch-up reads.",
                        static_cast<double>(f.journal_hold_lag_records)));
    out.push_back(Gauge("bloom_journal_pending_bytes",
                        "Journal bytes not yet covered by a checkpoint (replayed on restart).",
                        static_cast<double>(f.journal_pending_bytes)));
    out.push_back(Gauge("bloom_checkpoint_lag_seconds",
                        "Age of the oldest unpersisted change's checkpoint: seconds since the "
                        "last checkpoint of the filter that has waited longest; 0 if none waits.",
                        absl::ToDoubleSeconds(f.checkpoint_lag)));
    MetricFamily checkpoints{"bloom_checkpoints_total",
                             "Background checkpoints of a filter, by result.",
                             MetricType::Counter,
                             {}};
    for (const auto& [result, count] :
         {std::pair{"ok", f.checkpoints}, std::pair{"error", f.checkpoint_failures}}) {
      ClientMetric metric;
      metric.label = {{"result", result}};
      metric.counter.value = static_cast<double>(count);
      checkpoints.metric.push_back(std::move(metric));
    }
    out.push_back(std::move(checkpoints));
    out.push_back(Counter("bloom_filters_expired_total",
                          "Filters deleted because they were idle for their idle_ttl.",
                          static_cast<double>(f.filters_expired)));
    out.push_back(Counter("bloom_window_slices_retired_total",
                          "Expired time slices of windowed filters retired: their memory freed "
                          "and their pages range-deleted.",
                          static_cast<double>(f.slices_retired)));
    out.push_back(Counter("bloom_wal_syncs_total",
                          "With --sync: fsyncs of the write-ahead log that acknowledged adds "
                          "(one serves every add that waited meanwhile).",
                          static_cast<double>(f.wal_syncs)));
    out.push_back(Counter("bloom_wal_sync_requests_total",
                          "With --sync: add calls and Pipeline batches acknowledged after a "
                          "shared fsync (divided by bloom_wal_syncs_total: the group size).",
                          static_cast<double>(f.wal_sync_requests)));
    out.push_back(Counter("bloom_group_commits_total",
                          "Shared batches that served the adds of Add calls and Pipeline "
                          "batches waiting together: one RocksDB write for all.",
                          static_cast<double>(f.group_commits)));
    out.push_back(Counter("bloom_group_commit_batches_total",
                          "Add calls and Pipeline batches with adds served by a shared batch "
                          "(divided by bloom_group_commits_total: the group size).",
                          static_cast<double>(f.group_commit_jobs)));
    const storage::RocksDbFigures& db = f.rocksdb;
    out.push_back(Gauge("bloom_rocksdb_live_sst_bytes", "Size of RocksDB's live SST files.",
                        static_cast<double>(db.live_sst_bytes)));
    out.push_back(Gauge("bloom_rocksdb_pending_compaction_bytes",
                        "RocksDB's estimate of the bytes compaction still has to rewrite.",
                        static_cast<double>(db.pending_compaction_bytes)));
    out.push_back(Gauge("bloom_rocksdb_memtable_bytes", "Bytes in RocksDB's memtables.",
                        static_cast<double>(db.memtable_bytes)));
    out.push_back(Gauge("bloom_rocksdb_table_reader_bytes",
                        "Memory of RocksDB's open SST files outside its block cache.",
                        static_cast<double>(db.table_reader_bytes)));
    out.push_back(Gauge("bloom_rocksdb_block_cache_bytes",
                        "Bytes in RocksDB's block cache (data, index and filter blocks).",
                        static_cast<double>(db.block_cache_bytes)));
    out.push_back(Gauge("bloom_rocksdb_write_stopped",
                        "1 while RocksDB stops writes (a write stall), else 0.",
                        db.write_stopped ? 1 : 0));
    out.push_back(Gauge("bloom_rocksdb_delayed_write_rate_bytes",
                        "The rate RocksDB slows writes down to, in bytes/s; 0 when not slowed.",
                        static_cast<double>(db.delayed_write_rate)));
    out.push_back(Counter("bloom_rocksdb_write_stall_seconds_total",
                          "Time writes spent waiting in RocksDB write stalls.",
                          static_cast<double>(db.write_stall_micros) / 1e6));
  }

  static void AddProcess(std::vector<MetricFamily>& out) {
    const ProcessFigures p = ReadProcessFigures();
    out.push_back(
        Counter("process_cpu_seconds_total", "User and system CPU time spent.", p.cpu_seconds));
    out.push_back(Gauge("process_resident_memory_bytes", "Resident memory size in bytes.",
                        static_cast<double>(p.resident_bytes)));
    out.push_back(Gauge("process_virtual_memory_bytes", "Virtual memory size in bytes.",
                        static_cast<double>(p.virtual_bytes)));
    out.push_back(
        Gauge("process_open_fds", "Open file descriptors.", static_cast<double>(p.open_fds)));
    out.push_back(Gauge("process_max_fds", "The limit of open file descriptors.",
                        static_cast<double>(p.max_fds)));
    out.push_back(Gauge("process_start_time_seconds", "Start time since the epoch, in seconds.",
                        p.start_time_seconds));
    MetricFamily connections{"bloom_connections",
                             "Established TCP connections accepted on each port this process "
                             "listens on (gRPC, health, metrics), read at each scrape.",
                             MetricType::Gauge,
                             {}};
    for (const auto& [port, count] : InboundConnections()) {
      ClientMetric metric;
      metric.label = {{"port", std::to_string(port)}};
      metric.gauge.value = static_cast<double>(count);
      connections.metric.push_back(std::move(metric));
    }
    if (!connections.metric.empty()) out.push_back(std::move(connections));
  }

  static void AddCertificates(const ServerMetrics::CertificateExpiries& certificates,
                              std::vector<MetricFamily>& out) {
    if (certificates.empty()) return;
    MetricFamily expiry{"bloom_tls_certificate_expiry_timestamp_seconds",
                        "When each certificate this server presents or checks against expires "
                        "(its notAfter, seconds since the epoch), read from its file at each "
                        "scrape, so a rotated certificate shows at once.",
                        MetricType::Gauge,
                        {}};
    for (const auto& [name, expires] : certificates) {
      ClientMetric metric;
      metric.label = {{"certificate", name}};
      metric.gauge.value = absl::ToDoubleSeconds(expires - absl::UnixEpoch());
      expiry.metric.push_back(std::move(metric));
    }
    out.push_back(std::move(expiry));
  }

  static void AddShards(const ShardFigures& f, std::vector<MetricFamily>& out) {
    MetricFamily group{"bloom_shard_group",
                       "1, labelled with the group (--cluster) this pod serves in the shard map: "
                       "join on it to sum any metric by group.",
                       MetricType::Gauge,
                       {}};
    ClientMetric member;
    member.label = {{"group", f.group}};
    member.gauge.value = 1;
    group.metric.push_back(std::move(member));
    out.push_back(std::move(group));
    out.push_back(Gauge("bloom_shard_map_version",
                        "The version of the shard map this pod holds (0: none read yet).",
                        static_cast<double>(f.map_version)));
    out.push_back(Gauge("bloom_shard_groups", "Groups in the shard map this pod holds.",
                        static_cast<double>(f.groups)));
    out.push_back(
        Gauge("bloom_shard_slots", "The deployment's slot count.", static_cast<double>(f.slots)));
    out.push_back(Gauge("bloom_shard_slots_owned",
                        "Slots this pod's group owns in the shard map it holds.",
                        static_cast<double>(f.slots_owned)));
    MetricFamily forwarded{"bloom_shard_forwarded_total",
                           "Calls for filters of another group forwarded there, by group.",
                           MetricType::Counter,
                           {}};
    for (const auto& [group, count] : f.forwarded) {
      ClientMetric metric;
      metric.label = {{"group", group}};
      metric.counter.value = static_cast<double>(count);
      forwarded.metric.push_back(std::move(metric));
    }
    out.push_back(std::move(forwarded));
    out.push_back(Counter("bloom_shard_refused_total",
                          "Calls for filters refused UNAVAILABLE by routing: no shard map yet, no "
                          "pod up in the owning group, or forwarded here by a pod holding "
                          "another version.",
                          static_cast<double>(f.refused)));
    out.push_back(Gauge("bloom_shard_move_in_progress",
                        "1 while the shard map this pod holds records a slot move.",
                        f.moving ? 1 : 0));
    out.push_back(Gauge("bloom_shard_move_writes_paused",
                        "1 while the shard map this pod holds pauses writes to moving slots.",
                        f.writes_paused ? 1 : 0));
    out.push_back(Gauge("bloom_shard_move_paused_seconds",
                        "How long this pod has refused writes to the moving slots, for the "
                        "current pause (0: none).",
                        f.paused_seconds));
    out.push_back(Counter("bloom_shard_move_pauses_total",
                          "Write pauses of slot moves this pod saw end (flip or abort).",
                          static_cast<double>(f.pauses_ended)));
    out.push_back(Counter("bloom_shard_move_paused_seconds_total",
                          "The total length of the write pauses this pod saw end.",
                          f.paused_seconds_total));
    out.push_back(Counter("bloom_shard_move_copied_bytes_total",
                          "Bytes of filters slot movers imported into this pod (whole copies).",
                          static_cast<double>(f.move_bytes_copied)));
    out.push_back(Counter("bloom_shard_move_caught_up_items_total",
                          "Item hashes (and cuckoo slot changes) slot movers applied to "
                          "copies at this pod from their owner's journal (ApplyJournal).",
                          static_cast<double>(f.move_items_caught_up)));
  }

  static void AddReplication(const ReplicationFigures& r, std::vector<MetricFamily>& out) {
    MetricFamily role{"bloom_replication_role",
                      "1 for this server's role: primary or follower (--replicate_from).",
                      MetricType::Gauge,
                      {}};
    ClientMetric is;
    is.label = {{"role", r.follower ? "follower" : "primary"}};
    is.gauge.value = 1;
    role.metric.push_back(std::move(is));
    out.push_back(std::move(role));
    if (r.elected) {
      out.push_back(Gauge("bloom_cluster_term",
                          "The current term of the cluster's primary, elected through etcd (the "
                          "leader key's creation revision: it only grows).",
                          static_cast<double>(r.term)));
      if (!r.follower) {
        out.push_back(Gauge("bloom_cluster_sync_set_members",
                            "Followers in the sync set this primary recorded in etcd, whose "
                            "acknowledgements count.",
                            static_cast<double>(r.sync_set_size)));
      }
    }
    if (r.follower) {
      out.push_back(Gauge("bloom_replica_connected",
                          "1 while this follower's stream from its primary is up.",
                          r.connected ? 1 : 0));
      out.push_back(Gauge("bloom_replica_applied_sequence",
                          "The last sequence of the primary's log applied (durably) here.",
                          static_cast<double>(r.applied_sequence)));
      out.push_back(Gauge("bloom_replica_lag_sequences",
                          "Sequences the primary had written, as last heard, that this "
                          "follower has not applied.",
                          static_cast<double>(r.primary_sequence -
                                              std::min(r.primary_sequence, r.applied_sequence))));
      out.push_back(Gauge("bloom_replica_lag_seconds",
                          "How far behind the primary's clock this follower's data is: the "
                          "delay of its last catch-up, or the time since (while behind or cut "
                          "off). +Inf before the first catch-up.",
                          absl::ToDoubleSeconds(r.lag)));
      out.push_back(Gauge("bloom_replica_reads_waiting",
                          "Reads waiting here for a write this follower has not applied yet "
                          "(min_sequence: read your writes); past a bound they go to the "
                          "primary at once.",
                          static_cast<double>(r.reads_waiting)));
      return;
    }
    out.push_back(Gauge("bloom_replication_sequence", "The latest sequence of this primary's log.",
                        static_cast<double>(r.latest_sequence)));
    out.push_back(Gauge("bloom_replication_followers", "Followers tailing this primary's log.",
                        static_cast<double>(r.followers.size())));
    MetricFamily lag{"bloom_replication_follower_lag_sequences",
                     "Sequences of this primary's log that a follower has not acknowledged "
                     "as durable.",
                     MetricType::Gauge,
                     {}};
    for (const ReplicationFigures::Follower& follower : r.followers) {
      ClientMetric metric;
      metric.label = {{"follower", follower.name}};
      metric.gauge.value = static_cast<double>(
          r.latest_sequence - std::min(r.latest_sequence, follower.durable_sequence));
      lag.metric.push_back(std::move(metric));
    }
    out.push_back(std::move(lag));
    out.push_back(Counter("bloom_replica_ack_timeouts_total",
                          "Writes that failed UNAVAILABLE because fewer than "
                          "--min_replica_acks followers acknowledged them in time.",
                          static_cast<double>(r.ack_timeouts)));
    out.push_back(Gauge("bloom_replication_writes_waiting_acks",
                        "Writes waiting now for --min_replica_acks followers to acknowledge "
                        "them (they fail UNAVAILABLE at --replica_ack_timeout).",
                        static_cast<double>(r.writes_waiting_acks)));
  }

  mutable bloomsync::BlockingMutex mu_;  // scrapes and SetStore/SetReplicationSource
  storage::FiguresSource* store_ ABSL_GUARDED_BY(mu_);
  std::function<ReplicationFigures()> replication_ ABSL_GUARDED_BY(mu_);
  std::function<ShardFigures()> shards_ ABSL_GUARDED_BY(mu_);
  std::function<ServerMetrics::CertificateExpiries()> certificates_ ABSL_GUARDED_BY(mu_);
};

// The metrics listener (CivetWeb, one worker thread per connection being served): how many
// workers, how long one waits for a whole request, and how many accepted connections and
// pending handshakes may queue. A worker that a slow or silent client holds is free again after
// the timeout, so N such clients delay a scrape by at most about N / workers x timeout: 200
// slow connections cost 4 x 0.3 s. A scraper sends its request at once, so 300 ms is ample.
constexpr int kMetricsWorkers = 64;
constexpr int kMetricsRequestTimeoutMs = 300;
constexpr int kMetricsQueue = 1024;

// Latency buckets from 50 µs (a cached single-key call) to 10 s (a large import).
const prometheus::Histogram::BucketBoundaries& LatencyBuckets() {
  static const auto* const buckets = new prometheus::Histogram::BucketBoundaries{
      0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
      0.05,    0.1,    0.25,    0.5,    1,     2.5,    5,     10};
  return *buckets;
}

}  // namespace

std::unique_ptr<ServerMetrics> ServerMetrics::Create(storage::FiguresSource* store) {
  return std::unique_ptr<ServerMetrics>(new ServerMetrics(store));
}

ServerMetrics::ServerMetrics(storage::FiguresSource* store)
    : registry_(std::make_shared<prometheus::Registry>()),
      state_(std::make_shared<StateCollector>(store)) {
  requests_ = &prometheus::BuildCounter()
                   .Name("bloom_rpc_requests_total")
                   .Help("Finished bloom.v1 RPCs by method and gRPC status code.")
                   .Register(*registry_);
  auto& durations = prometheus::BuildHistogram()
                        .Name("bloom_rpc_duration_seconds")
                        .Help("Time from a call's arrival in the handler to its answer.")
                        .Register(*registry_);
  for (const rpcs::RpcInfo& info : rpcs::All()) {
    if (!info.measured) continue;
    durations_[static_cast<size_t>(info.rpc)] =
        &durations.Add({{"method", info.label}}, LatencyBuckets());
  }
  items_added_ = &prometheus::BuildCounter()
                      .Name("bloom_items_added_total")
                      .Help("Items in successful Add calls and Pipeline adds (new or not).")
                      .Register(*registry_)
                      .Add({});
  items_checked_ = &prometheus::BuildCounter()
                        .Name("bloom_items_checked_total")
                        .Help("Items in successful MightContain calls and Pipeline checks.")
                        .Register(*registry_)
                        .Add({});
  auto& auth_failures = prometheus::BuildCounter()
                            .Name("bloom_auth_failures_total")
                            .Help("Calls refused by token authentication, by gRPC status code.")
                            .Register(*registry_);
  unauthenticated_ = &auth_failures.Add({{"code", "UNAUTHENTICATED"}});
  permission_denied_ = &auth_failures.Add({{"code", "PERMISSION_DENIED"}});
  auto& transfers = prometheus::BuildGauge()
                        .Name("bloom_transfers_in_progress")
                        .Help(
                            "Export and Import streams running now (an import's reserved memory "
                            "is in bloom_filter_memory_bytes).")
                        .Register(*registry_);
  auto& abandoned = prometheus::BuildCounter()
                        .Name("bloom_transfers_abandoned_total")
                        .Help(
                            "Export and Import streams cancelled for making no progress for "
                            "--transfer_idle_timeout.")
                        .Register(*registry_);
  for (const int import : {0, 1}) {
    const std::string kind = import == 1 ? "import" : "export";
    transfers_in_progress_[import] = &transfers.Add({{"kind", kind}});
    transfers_abandoned_[import] = &abandoned.Add({{"kind", kind}});
  }
}

void ServerMetrics::RecordTransferStart(bool import) {
  transfers_in_progress_[import ? 1 : 0]->Increment();
}

void ServerMetrics::RecordTransferEnd(bool import, bool abandoned) {
  transfers_in_progress_[import ? 1 : 0]->Decrement();
  if (abandoned) transfers_abandoned_[import ? 1 : 0]->Increment();
}

ServerMetrics::~ServerMetrics() = default;

void ServerMetrics::SetStore(storage::FiguresSource* store) {
  static_cast<StateCollector*>(state_.get())->SetStore(store);
}

void ServerMetrics::SetShardSource(std::function<ShardFigures()> source) {
  static_cast<StateCollector*>(state_.get())->SetShardSource(std::move(source));
}

void ServerMetrics::SetCertificateSource(std::function<CertificateExpiries()> source) {
  static_cast<StateCollector*>(state_.get())->SetCertificateSource(std::move(source));
}

void ServerMetrics::SetReplicationSource(std::function<ReplicationFigures()> source) {
  static_cast<StateCollector*>(state_.get())->SetReplicationSource(std::move(source));
}

absl::Status ServerMetrics::Serve(const std::string& listen) {
  // prometheus-cpp (CivetWeb) reports a bind failure by throwing; it stops here.
  try {
    // Enough workers, a short time limit per request and queues deep enough that clients
    // which open connections and never finish their request cannot keep a scrape waiting
    // (prometheus-cpp's default is 2 workers and civetweb's 30 s to read a request); a full
    // kernel backlog would drop the scraper's SYN and cost it a 1 s retransmission.
    const std::string queue = std::to_string(kMetricsQueue);
    exposer_ = std::make_unique<prometheus::Exposer>(std::vector<std::string>{
        "listening_ports", listen, "num_threads", std::to_string(kMetricsWorkers),
        "request_timeout_ms", std::to_string(kMetricsRequestTimeoutMs), "connection_queue", queue,
        "listen_backlog", queue});
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat("cannot serve metrics on ", listen,
                                               " (address in use or invalid?): ", e.what()));
  }
  exposer_->RegisterCollectable(registry_);
  exposer_->RegisterCollectable(state_);
  const std::vector<int> ports = exposer_->GetListeningPorts();
  port_ = ports.empty() ? 0 : ports.front();
  return absl::OkStatus();
}

prometheus::Counter& ServerMetrics::RequestCounter(rpcs::Rpc rpc, absl::StatusCode code) {
  auto code_index = static_cast<size_t>(code);
  if (code_index >= kNumCodes) code_index = static_cast<size_t>(absl::StatusCode::kUnknown);
  std::atomic<prometheus::Counter*>& slot = request_series_[static_cast<size_t>(rpc)][code_index];
  prometheus::Counter* counter = slot.load(std::memory_order_acquire);
  if (counter == nullptr) {
    // Family::Add returns the same series for the same labels, so racing threads agree.
    counter = &requests_->Add(
        {{"method", rpcs::Info(rpc).label},
         {"code", absl::StatusCodeToString(static_cast<absl::StatusCode>(code_index))}});
    slot.store(counter, std::memory_order_release);
  }
  return *counter;
}

void ServerMetrics::RecordRpc(rpcs::Rpc rpc, absl::StatusCode code, absl::Duration latency,
                              size_t items) {
  const rpcs::RpcInfo& info = rpcs::Info(rpc);
  if (!info.measured) return;
  RequestCounter(rpc, code).Increment();
  durations_[static_cast<size_t>(rpc)]->Observe(absl::ToDoubleSeconds(latency));
  if (code != absl::StatusCode::kOk || items == 0) return;
  if (info.items == rpcs::CountedItems::kAdded) {
    items_added_->Increment(static_cast<double>(items));
  }
  if (info.items == rpcs::CountedItems::kChecked) {
    items_checked_->Increment(static_cast<double>(items));
  }
}

void ServerMetrics::RecordAuthFailure(absl::StatusCode code) {
  (code == absl::StatusCode::kPermissionDenied ? permission_denied_ : unauthenticated_)
      ->Increment();
}

std::string ServerMetrics::Render() const {
  std::vector<MetricFamily> families = registry_->Collect();
  for (MetricFamily& family : state_->Collect()) families.push_back(std::move(family));
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, families);
  return out.str();
}

}  // namespace metrics
