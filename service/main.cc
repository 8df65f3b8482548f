// bloom-server: persistent Bloom filters over gRPC.
//
// main() sets up logging from the flags (service/server_flags.h), opens the store, starts the
// metrics listener and the gRPC servers, then waits for signals: SIGHUP re-reads credentials,
// SIGTERM/SIGINT shut down in a fixed order.
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <string>

#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/container_memory.h"
#include "common/heap.h"
#include "common/log.h"
#include "common/open_files.h"
#include "common/status_macros.h"
#include "coordination/sync_set_keeper.h"
#include "google/protobuf/stubs/logging.h"
#include "metrics/metrics.h"
#include "replication/follower.h"
#include "replication/replication_service.h"
#include "service/ack_log.h"
#include "service/auth.h"
#include "service/failover.h"
#include "service/forwarder.h"
#include "service/server.h"
#include "service/server_flags.h"
#include "storage/filter_store.h"

// jemalloc's start-up options (read by jemalloc when it serves malloc, common/heap.h; unused
// otherwise): a background thread returns free pages after their decay time, so neither RSS
// nor a request's latency waits for the next allocation to do it.
extern "C" {
// NOLINTNEXTLINE: the name and type are jemalloc's interface.
const char* malloc_conf = "background_thread:true";
}

namespace {

// How long calls in flight may finish when the server is rebuilt in a new role.
constexpr absl::Duration kRoleChangeGrace = absl::Milliseconds(300);
// How long a primary told to stop waits for a follower to catch up before it hands over.
constexpr absl::Duration kHandOverOnStop = absl::Seconds(5);

// SIGTERM/SIGINT arrive on whichever thread the kernel picks (gRPC starts threads before
// main); the handler only writes the signal number to a pipe that main() waits on.
int shutdown_pipe[2] = {-1, -1};

extern "C" void OnShutdownSignal(int signal_number) {
  const char byte = static_cast<char>(signal_number);
  [[maybe_unused]] ssize_t ignored = write(shutdown_pipe[1], &byte, 1);
}

bool InstallShutdownHandlers() {
  if (pipe2(shutdown_pipe, O_CLOEXEC) != 0) return false;
  struct sigaction action = {};
  action.sa_handler = OnShutdownSignal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  return sigaction(SIGTERM, &action, nullptr) == 0 && sigaction(SIGINT, &action, nullptr) == 0 &&
         sigaction(SIGHUP, &action, nullptr) == 0;
}

// Waits up to `timeout` for a signal; 0 if none came.
// Wakes WaitForSignal without a signal (it returns 0): a change of role is acted on at once.
void WakeMainLoop() {
  const char byte = 0;
  [[maybe_unused]] ssize_t ignored = write(shutdown_pipe[1], &byte, 1);
}

int WaitForSignal(absl::Duration timeout) {
  pollfd fd{shutdown_pipe[0], POLLIN, 0};
  if (poll(&fd, 1, static_cast<int>(absl::ToInt64Milliseconds(timeout))) <= 0) return 0;
  char byte = 0;
  while (read(shutdown_pipe[0], &byte, 1) < 0 && errno == EINTR) {
  }
  return byte;
}

// Re-reads the token file (always on SIGHUP, else when it changed) and logs the outcome.
void ReloadCredentials(service::TokenAuthenticator* auth, const service::TlsOptions& tls,
                       bool sighup) {
  if (sighup && tls.enabled()) {
    // gRPC's file watcher loads certificate changes itself; say whether they are usable.
    absl::Status checked = service::CheckTlsFiles(tls);
    if (checked.ok()) {
      bloomlog::LogInfo(absl::StrCat("SIGHUP: TLS files are valid; they are in use within ",
                                     absl::FormatDuration(tls.reload_interval)));
    } else {
      bloomlog::LogError(absl::StrCat("SIGHUP: TLS files are not usable: ", checked.message()));
    }
  }
  if (auth == nullptr) return;
  absl::StatusOr<bool> reloaded = auth->Reload(/*force=*/sighup);
  if (!reloaded.ok()) {
    bloomlog::LogError(absl::StrCat("token file not reloaded, the previous tokens stay in force: ",
                                    reloaded.status().message()));
  } else if (*reloaded) {
    bloomlog::LogInfo(absl::StrCat("token file reloaded: ", auth->size(), " tokens"));
  }
}

// Whether "host:port" names a loopback host.
bool IsLoopback(absl::string_view listen) {
  const size_t colon = listen.rfind(':');
  absl::string_view host = colon == absl::string_view::npos ? listen : listen.substr(0, colon);
  absl::ConsumePrefix(&host, "[");
  absl::ConsumeSuffix(&host, "]");
  return host == "localhost" || host == "::1" || absl::StartsWith(host, "127.");
}

int Fail(absl::string_view message) {
  bloomlog::LogError(message);
  return 1;
}

// libprotobuf logs an ERROR line for every request whose string fields are not UTF-8, which the
// server serves anyway (protos/wire/items_as_bytes.h): a client could fill the log with them.
// Parse complaints are dropped; anything else goes to the server's log.
void RouteProtobufLogs() {
  google::protobuf::SetLogHandler(
      [](google::protobuf::LogLevel level, const char* file, int line, const std::string& message) {
        if (absl::StrContains(file, "wire_format_lite")) return;
        const std::string text = absl::StrCat("protobuf: ", message, " (", file, ":", line, ")");
        if (level >= google::protobuf::LOGLEVEL_ERROR) {
          bloomlog::LogError(text);
        } else {
          bloomlog::LogWarning(text);
        }
      });
}

void LogHostLimits(const bloomsys::ContainerMemory& container) {
  bloomlog::LogInfo(
      absl::StrCat("container memory: ", container.bytes, " bytes, from ", container.source));
  if (absl::StatusOr<bloomsys::OpenFileLimit> files = bloomsys::RaiseOpenFileLimit(); files.ok()) {
    bloomlog::LogInfo(absl::StrCat("open-file limit: ", files->now,
                                   files->now != files->before
                                       ? absl::StrCat(" (raised from ", files->before, ")")
                                       : std::string(" (the hard limit)")));
  } else {
    bloomlog::LogWarning(absl::StrCat("open-file limit not raised: ", files.status().message()));
  }
}

// The token file's authenticator, or null without one.
absl::StatusOr<std::unique_ptr<service::TokenAuthenticator>> LoadTokens(
    const std::string& token_file) {
  if (token_file.empty()) return nullptr;
  absl::StatusOr<std::unique_ptr<service::TokenAuthenticator>> auth =
      service::TokenAuthenticator::Load(token_file);
  if (auth.ok() && (*auth)->size() == 0) {
    bloomlog::LogWarning(absl::StrCat("the token file ", token_file,
                                      " holds no tokens: every call but health is refused"));
  }
  return auth;
}

absl::StatusOr<std::unique_ptr<storage::FilterStore>> OpenStore(
    const storage::StoreOptions& options) {
  bloomlog::LogInfo(absl::StrCat("starting bloom-server: data_dir=", options.data_dir,
                                 " sync=", options.sync ? "true" : "false",
                                 " memory_limit=", options.memory_limit_bytes,
                                 " allocator=", bloomheap::AllocatorName()));
  absl::StatusOr<std::unique_ptr<storage::FilterStore>> store = storage::FilterStore::Open(options);
  if (!store.ok()) return store;
  const storage::LoadReport& report = (*store)->load_report();
  bloomlog::LogInfo(absl::StrCat(
      "loaded ", report.filters, " filters (", report.pages, " pages, ", report.journal_records,
      " journal records, ", report.unreadable, " unreadable, ", report.not_loaded,
      " larger than the memory limit, ", report.cold, " cold (on disk until used), ",
      (*store)->memory_used(), " bytes) in ", absl::FormatDuration(report.elapsed)));
  return store;
}

void LogServing(const service::ServerOptions& options, const service::BloomServer& server) {
  const service::TlsOptions& tls = options.tls;
  const bool auth = options.hooks.auth != nullptr;
  bloomlog::LogInfo(absl::StrCat(
      "serving on ", options.listen, " (port ", server.port(), ", callback model, ",
      tls.enabled() ? (tls.client_ca_file.empty() ? "TLS" : "mutual TLS") : "plaintext",
      auth ? ", token auth" : ", no auth", ")"));
  if (!options.health_listen.empty()) {
    bloomlog::LogInfo(absl::StrCat("serving health checks on ", options.health_listen, " (port ",
                                   server.health_port(), ", plaintext)"));
  }
  if (IsLoopback(options.listen)) return;
  if (!tls.enabled()) {
    bloomlog::LogWarning(absl::StrCat("listening on the non-loopback address ", options.listen,
                                      " without TLS: traffic", auth ? " and tokens" : "",
                                      " can be read on the network; set --tls_cert_file and "
                                      "--tls_key_file"));
  }
  if (!auth) {
    bloomlog::LogWarning(absl::StrCat("listening on the non-loopback address ", options.listen,
                                      " without authentication: anyone who can reach it may "
                                      "read and write every filter; set --auth_token_file"));
  }
}

// Writes then renames, so a reader never sees a half-written file.
absl::Status WritePortFile(const std::string& port_file, int port, int metrics_port,
                           int health_port) {
  const std::string tmp = port_file + ".tmp";
  {
    std::ofstream out(tmp);
    out << port << "\n";
    if (metrics_port != 0) out << "metrics " << metrics_port << "\n";
    if (health_port != 0) out << "health " << health_port << "\n";
  }
  if (std::rename(tmp.c_str(), port_file.c_str()) != 0) {
    return absl::InternalError(absl::StrCat("cannot write --port_file ", port_file));
  }
  return absl::OkStatus();
}

// Serves until SIGTERM or SIGINT (re-reading credentials on SIGHUP and when they change);
// returns the signal. On a follower, also refreshes its health and returns 0 when it needs a
// new snapshot of its primary; with failover, returns 0 when `role_changed` says so.
int ServeUntilStopped(service::TokenAuthenticator* auth, const service::TlsOptions& tls,
                      replication::Follower* follower, const std::function<bool()>& role_changed) {
  int signal_number = 0;
  int ticks = 0;
  const bool poll = follower != nullptr || role_changed != nullptr;
  while (signal_number != SIGTERM && signal_number != SIGINT) {
    signal_number = WaitForSignal(poll ? absl::Milliseconds(200) : absl::Seconds(1));
    if (follower != nullptr) {
      follower->RefreshHealth();
      if (follower->needs_snapshot()) return 0;
    }
    if (role_changed != nullptr && role_changed()) return 0;
    // Credentials are looked at once a second.
    if (signal_number == SIGHUP || follower == nullptr || ++ticks % 5 == 0) {
      ReloadCredentials(auth, tls, signal_number == SIGHUP);
    }
  }
  return signal_number;
}

// SIGTERM or SIGINT if one arrived (without waiting), else 0: a follower's snapshot copy stops
// for them.
int StopSignalArrived() {
  const int signal_number = WaitForSignal(absl::ZeroDuration());
  return signal_number == SIGTERM || signal_number == SIGINT ? signal_number : 0;
}

// `listen` ("host:port") with its port replaced.
std::string WithPort(const std::string& listen, int port) {
  const size_t colon = listen.rfind(':');
  return absl::StrCat(colon == std::string::npos ? listen : listen.substr(0, colon), ":", port);
}

absl::StatusOr<replication::FollowerOptions> FollowerOptionsFromConfig(
    const service::ReplicationConfig& config, const std::string& listen) {
  replication::FollowerOptions options;
  options.primary = config.replicate_from;
  options.max_lag = config.max_lag;
  options.name = config.name;
  if (options.name.empty()) {
    char host[256] = {};
    if (gethostname(host, sizeof(host) - 1) == 0) options.name = host;
    options.name = absl::StrCat(options.name, ":", listen.substr(listen.rfind(':') + 1));
  }
  auto read_file = [](const std::string& path) -> absl::StatusOr<std::string> {
    std::ifstream in(path);
    if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
    std::stringstream contents;
    contents << in.rdbuf();
    return contents.str();
  };
  if (!config.token_file.empty()) {
    absl::StatusOr<std::string> token = read_file(config.token_file);
    if (!token.ok()) return token.status();
    options.token = std::string(absl::StripAsciiWhitespace(*token));
    if (options.token.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--replication_token_file ", config.token_file, " is empty"));
    }
  }
  if (!config.ca_file.empty()) {
    absl::StatusOr<std::string> ca = read_file(config.ca_file);
    if (!ca.ok()) return ca.status();
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = *ca;
    if (!config.cert_file.empty()) {  // for a primary with --tls_client_ca_file
      absl::StatusOr<std::string> cert = read_file(config.cert_file);
      if (!cert.ok()) return cert.status();
      absl::StatusOr<std::string> key = read_file(config.key_file);
      if (!key.ok()) return key.status();
      ssl.pem_cert_chain = *std::move(cert);
      ssl.pem_private_key = *std::move(key);
    }
    options.credentials = grpc::SslCredentials(ssl);
  }
  return options;
}

// One incarnation of the server: the store, the calls' server, and what replication adds (a
// primary's service for its followers; a follower's forwarder and log tailer).
struct Node {
  std::unique_ptr<storage::FilterStore> store;
  // A primary's service for its followers; on a follower it answers Status only.
  std::unique_ptr<replication::ReplicationService> replication;
  std::unique_ptr<service::Forwarder> forwarder;  // follower
  std::unique_ptr<service::BloomServer> server;
  std::unique_ptr<replication::Follower> follower;  // follower
  // A primary elected through etcd with --min_replica_acks: its sync set.
  std::unique_ptr<coordination::SyncSetKeeper> sync_set;

  metrics::ReplicationFigures Figures() const {
    metrics::ReplicationFigures figures;
    if (follower != nullptr) {
      const replication::FollowerStatus status = follower->status();
      figures.follower = true;
      figures.connected = status.connected;
      figures.applied_sequence = status.applied_sequence;
      figures.primary_sequence = status.primary_sequence;
      figures.lag = status.lag;
      return figures;
    }
    figures.latest_sequence = store->LatestSequence();
    if (replication != nullptr) {  // a primary's followers
      for (const replication::FollowerStream& f : replication->Followers()) {
        figures.followers.push_back({f.name, f.sent_sequence, f.durable_sequence});
      }
    }
    if (store->replica_acks() != nullptr) figures.ack_timeouts = store->replica_acks()->timeouts();
    return figures;
  }

  // Stops in a fixed order: the log's streams, the calls (drained), the tailer, the store.
  // `grace`: how long calls in flight may finish (default: --shutdown_grace).
  absl::Status Stop(absl::optional<absl::Duration> grace = absl::nullopt) {
    if (replication != nullptr) replication->Stop();
    if (follower != nullptr) follower->Stop();
    if (server != nullptr) server->Shutdown(grace);
    server.reset();
    sync_set.reset();  // after the calls (Status reads it), before the store's acknowledgements
    follower.reset();
    forwarder.reset();
    const absl::Status closed = store->Close();
    replication.reset();
    return closed;
  }
};

// A follower told to follow another primary keeps serving reads from its store: only its log
// tailer and its forwarder change primary. That needs a follower that holds nothing past where
// the new primary took over (else it copies the new primary's data, in a new incarnation) and
// is not copying a snapshot. While the cluster has no primary, it serves reads as it was.
// Returns whether it goes on serving (`role_version` then names the role now played).
bool RetargetInPlace(Node& node, service::Failover& failover,
                     replication::FollowerOptions follower_options, uint64_t& role_version,
                     int64_t& data_term) {
  if (node.follower == nullptr || node.follower->needs_snapshot()) return false;
  uint64_t version = 0;
  const coordination::Role next = failover.role(&version);
  if (next.kind == coordination::Role::Kind::kNone) {
    // No primary now (an election runs): reads go on from what was applied.
    role_version = version;
    return true;
  }
  if (next.kind != coordination::Role::Kind::kFollower) return false;
  if (next.term != data_term && node.store->LatestSequence() > next.leader.start_sequence) {
    return false;
  }
  follower_options.primary = next.leader.address;
  node.forwarder->Retarget(next.leader.address);
  node.follower->Retarget(next.leader.address);
  node.replication->SetFollower(node.follower.get(), next.leader.address);
  role_version = version;
  data_term = next.term;
  bloomlog::LogInfo(absl::StrCat("follower: now follows the primary ", next.leader.name, " at ",
                                 next.leader.address, " (term ", next.term,
                                 "), serving reads throughout"));
  return true;
}

// A switchover from this primary (the Switchover call): followers as its replication service
// sees them.
absl::StatusOr<bloom::replication::v1::SwitchoverResponse> SwitchOver(Node& node,
                                                                      service::Failover& failover,
                                                                      const std::string& to,
                                                                      absl::Time deadline) {
  auto followers = [&node] {
    std::vector<service::Failover::FollowerProgress> out;
    for (const replication::FollowerStream& f : node.replication->Followers()) {
      out.push_back({f.name, f.durable_sequence});
    }
    return out;
  };
  auto latest = [&node] { return node.store->LatestSequence(); };
  absl::StatusOr<service::Failover::Handover> handover =
      failover.Switchover(to, deadline, followers, latest);
  if (!handover.ok()) return handover.status();
  bloom::replication::v1::SwitchoverResponse response;
  response.set_primary(handover->to);
  response.set_sequence(handover->sequence);
  response.set_term(handover->term);
  return response;
}

// A primary told to stop hands over to the follower holding the most first, if one is
// connected: writes then pause for an election's settle time instead of the lease's TTL, and
// the new primary needs no other member of the sync set to be up (a rolling upgrade stops
// pods one by one).
void HandOverBeforeStopping(Node& node, service::Failover& failover) {
  absl::StatusOr<bloom::replication::v1::SwitchoverResponse> handed =
      SwitchOver(node, failover, "", absl::Now() + kHandOverOnStop);
  if (handed.ok()) {
    bloomlog::LogInfo(absl::StrCat("handed over to ", handed->primary(), " at sequence ",
                                   handed->sequence(), " before stopping"));
  } else {
    bloomlog::LogInfo(absl::StrCat("stopping without handing over: ", handed.status().message()));
  }
}

// The latest sequence in the data dir (0 if it holds no database yet): what this pod holds
// when it joins an election. Opened and closed as a replica, which writes nothing, and lazily,
// so that no filter is loaded only to be dropped again (the incarnation opens it for real).
absl::StatusOr<uint64_t> HeldSequence(storage::StoreOptions options) {
  if (!std::filesystem::exists(std::filesystem::path(options.data_dir) / "CURRENT")) return 0;
  options.replica = true;
  options.lazy_start = true;
  options.background_checkpoints = false;
  options.may_acknowledge = nullptr;
  absl::StatusOr<std::unique_ptr<storage::FilterStore>> store = storage::FilterStore::Open(options);
  if (!store.ok()) return store.status();
  const uint64_t held = (*store)->LatestSequence();
  RETURN_IF_ERROR((*store)->Close());
  return held;
}

absl::Status StartNode(Node& node, const service::ServerConfig& config,
                       service::ServerOptions options,
                       const absl::StatusOr<replication::FollowerOptions>& follower_options) {
  if (config.store.replica) {
    node.forwarder = std::make_unique<service::Forwarder>(
        [options = *follower_options](const std::string& address) {
          replication::FollowerOptions to = options;
          to.primary = address;
          return replication::PrimaryChannel(to);  // a connection of its own
        },
        follower_options->primary,
        [&node](uint64_t sequence, absl::Time deadline, service::Forwarder::AppliedDone done) {
          if (node.follower == nullptr) {
            std::move(done)(false);
          } else {
            node.follower->WhenApplied(sequence, deadline, std::move(done));
          }
        });
    options.hooks.forwarder = node.forwarder.get();
    options.serving_at_start = false;  // until the follower has caught up
  }
  node.replication = std::make_unique<replication::ReplicationService>(
      node.store.get(), options.hooks.auth, config.store.data_dir);
  options.extra_services.push_back(node.replication.get());
  absl::StatusOr<std::unique_ptr<service::BloomServer>> server =
      service::BloomServer::Start(node.store.get(), options);
  if (!server.ok()) return server.status();
  node.server = *std::move(server);
  if (config.store.replica) {
    service::BloomServer* raw = node.server.get();
    node.follower = std::make_unique<replication::Follower>(
        node.store.get(), *follower_options, [raw](bool serving) { raw->SetServing(serving); });
    node.follower->Start();
    node.replication->SetFollower(node.follower.get(), follower_options->primary);
    bloomlog::LogInfo(absl::StrCat("follower of the primary at ", follower_options->primary,
                                   " (as ", follower_options->name, ")"));
  }
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  RouteProtobufLogs();
#ifdef NDEBUG
  // Debian's Abseil is built with mutex deadlock detection on, which keeps a lock graph on
  // every Lock (about 2% of a batched query's CPU). The unit tests keep it; release servers
  // do not pay for it.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
#endif
  absl::FlagsUsageConfig usage;
  usage.version_string = [] { return std::string("bloom-server ") + BLOOM_VERSION + "\n"; };
  absl::SetFlagsUsageConfig(usage);
  absl::SetProgramUsageMessage(
      "Persistent Bloom filters over gRPC.\n"
      "Flags may also be set as BLOOM_<FLAG> environment variables, e.g. BLOOM_DATA_DIR.");
  if (absl::Status applied = service::ApplyFlagEnvironment(); !applied.ok()) {
    std::fprintf(stderr, "bloom-server: %s\n", std::string(applied.message()).c_str());
    return 2;
  }
  absl::ParseCommandLine(argc, argv);
  absl::StatusOr<service::LogConfig> log = service::LogConfigFromFlags();
  if (!log.ok()) {
    std::fprintf(stderr, "bloom-server: %s\n", std::string(log.status().message()).c_str());
    return 2;
  }
  bloomlog::SetLevel(log->level);
  bloomlog::SetJson(log->json);
  // Found once: the budget and the transport's share are both cut from it, and the log says
  // where it came from (a wrong container size is how a server gets OOM-killed in a loop).
  const bloomsys::ContainerMemory container = bloomsys::FindContainerMemory();
  absl::StatusOr<service::ServerConfig> config = service::ConfigFromFlags(container);
  if (absl::IsFailedPrecondition(config.status())) return Fail(config.status().message());
  if (!config.ok()) {
    std::fprintf(stderr, "bloom-server: %s\n", std::string(config.status().message()).c_str());
    return 2;
  }
  for (const std::string& warning : config->warnings) bloomlog::LogWarning(warning);
  if (config->server.item_call_threads > 0) {
    // Before gRPC starts: its "poll" strategy polls each connection from the thread of one
    // completion queue, so that Add and MightContain are read, served and answered on one
    // thread (service/item_calls.h). An operator's own GRPC_POLL_STRATEGY wins.
    setenv("GRPC_POLL_STRATEGY", "poll", /*overwrite=*/0);
  }

  // Security settings are checked before the store opens, so a bad file fails fast.
  service::ServerOptions& server_options = config->server;
  if (server_options.tls.enabled()) {
    if (absl::Status checked = service::CheckTlsFiles(server_options.tls); !checked.ok()) {
      return Fail(absl::StrCat("TLS: ", checked.message()));
    }
  }
  absl::StatusOr<std::unique_ptr<service::TokenAuthenticator>> auth =
      LoadTokens(config->auth_token_file);
  if (!auth.ok()) return Fail(absl::StrCat("auth: ", auth.status().message()));
  if (!InstallShutdownHandlers()) return Fail("cannot install signal handlers");
  LogHostLimits(container);

  std::unique_ptr<metrics::ServerMetrics> server_metrics = metrics::ServerMetrics::Create(nullptr);
  if (!config->metrics_listen.empty()) {
    if (absl::Status serving = server_metrics->Serve(config->metrics_listen); !serving.ok()) {
      return Fail(serving.ToString());
    }
    bloomlog::LogInfo(absl::StrCat("serving metrics on http://", config->metrics_listen,
                                   "/metrics (port ", server_metrics->port(), ")"));
  }
  server_options.hooks.auth = auth->get();
  // Without a metrics listener nobody reads the figures: skip recording them per call.
  if (server_metrics->port() != 0) server_options.hooks.metrics = server_metrics.get();

  absl::StatusOr<replication::FollowerOptions> follower_options;
  if (char host[256] = {}; config->store.replica && gethostname(host, sizeof(host) - 1) == 0 &&
                           service::NamesThisHost(config->replication.replicate_from, host)) {
    bloomlog::LogInfo(absl::StrCat("--replicate_from=", config->replication.replicate_from,
                                   " names this host (", host, "): serving as the primary"));
    config->store.replica = false;
  }
  if (config->store.replica) {
    follower_options = FollowerOptionsFromConfig(config->replication, server_options.listen);
    if (!follower_options.ok()) {
      return Fail(absl::StrCat("replication: ", follower_options.status().message()));
    }
  }
  // With etcd, the primary is elected: each incarnation of the server plays the role the
  // pod's member was last told (service/failover.h).
  std::unique_ptr<service::Failover> failover;
  if (!config->replication.etcd_endpoints.empty()) {
    absl::StatusOr<uint64_t> held = HeldSequence(config->store);
    if (!held.ok()) return Fail(absl::StrCat("cannot open the store: ", held.status().ToString()));
    absl::StatusOr<std::unique_ptr<service::Failover>> started = service::Failover::Start(
        config->replication, config->store.min_replica_acks, *held, WakeMainLoop);
    if (!started.ok()) return Fail(absl::StrCat("etcd: ", started.status().ToString()));
    failover = *std::move(started);
    bloomlog::LogInfo(absl::StrCat("cluster ", config->replication.cluster, " in etcd at ",
                                   absl::StrJoin(config->replication.etcd_endpoints, ","),
                                   ": this pod is ", config->replication.advertise_address,
                                   ", holding sequence ", *held));
  }
  std::unique_ptr<service::AckLog> ack_log;
  if (!config->replication.ack_log.empty()) {
    absl::StatusOr<std::unique_ptr<service::AckLog>> opened = service::AckLog::Open(
        config->replication.ack_log, config->replication.name.empty()
                                         ? config->replication.advertise_address
                                         : config->replication.name);
    if (!opened.ok()) return Fail(opened.status().message());
    ack_log = *std::move(opened);
  }
  // A follower whose primary's log no longer reaches back to it copies a snapshot again: the
  // store, the server and the follower are then built anew, on the same port.
  bool copy_again = false;
  // The term of the primary whose log this pod's data continues (it led that term, or followed
  // it): writes past that primary's start sequence are its own, not writes it never had. 0:
  // not known (just started).
  int64_t data_term = 0;
  bool port_file_written = false;
  int signal_number = 0;
  absl::Time stop_start;
  absl::Status closed;
  service::ServerConfig base = *config;
  while (true) {
    Node node;
    uint64_t role_version = 0;
    coordination::Role role;
    if (failover != nullptr) {
      role = failover->WaitForRole(
          [&signal_number] { return (signal_number = StopSignalArrived()) != 0; }, &role_version);
      if (signal_number != 0) break;
      *config = base;
      if (role.kind == coordination::Role::Kind::kPrimary) {
        config->store.replica = false;
        config->store.may_acknowledge = failover->Fence();
        if (ack_log != nullptr) {
          ack_log->BeginTerm(role.term, role.leader.start_sequence);
          service::AckLog* log = ack_log.get();
          config->store.on_acknowledged = [log](uint64_t sequence) { log->Acknowledged(sequence); };
        }
      } else {
        config->store.replica = true;
        config->replication.replicate_from = role.leader.address;
        // The primary's sync set names followers as their members do.
        if (config->replication.name.empty()) {
          config->replication.name = config->replication.advertise_address;
        }
        follower_options = FollowerOptionsFromConfig(config->replication, server_options.listen);
        if (!follower_options.ok()) {
          return Fail(absl::StrCat("replication: ", follower_options.status().message()));
        }
        // Holding writes the new primary never had (this pod led, or followed one that led,
        // past the point where the new primary took over): they were never acknowledged, and
        // a fresh copy drops them.
        if (role.term != data_term && failover->held() > role.leader.start_sequence) {
          bloomlog::LogWarning(
              absl::StrCat("this pod holds sequence ", failover->held(), ", past ",
                           role.leader.start_sequence, " where the primary ", role.leader.name,
                           " took over: copying its data anew (writes only this pod had were never "
                           "acknowledged)"));
          copy_again = true;
        }
      }
      data_term = role.term;
    }
    if (config->store.replica) {
      absl::Status copied = replication::Bootstrap(
          *follower_options, config->store.data_dir, copy_again,
          [&signal_number] { return (signal_number = StopSignalArrived()) != 0; });
      if (absl::IsCancelled(copied)) break;
      if (!copied.ok()) return Fail(absl::StrCat("replication: ", copied.ToString()));
    }
    absl::StatusOr<std::unique_ptr<storage::FilterStore>> store = OpenStore(config->store);
    if (!store.ok())
      return Fail(absl::StrCat("cannot open the store: ", store.status().ToString()));
    node.store = *std::move(store);
    server_metrics->SetStore(node.store.get());
    if (failover != nullptr) {
      failover->SetStore(node.store.get());
      if (!config->store.replica && node.store->replica_acks() != nullptr) {
        // Before the server takes writes: nobody's acknowledgement counts until recorded.
        node.sync_set = std::make_unique<coordination::SyncSetKeeper>(
            failover->member(), node.store->replica_acks(), coordination::SyncSetKeeperOptions{});
      }
    }
    if (absl::Status started = StartNode(node, *config, server_options, follower_options);
        !started.ok()) {
      return Fail(started.ToString());
    }
    if (failover != nullptr) {
      const std::string cluster = config->replication.cluster;
      auto view = [&node, &failover, cluster] {
        uint64_t version = 0;
        const coordination::Role current = failover->role(&version);
        replication::ReplicationService::ClusterView out{
            cluster, current.term, current.leader.name, current.leader.address, {}};
        if (node.sync_set != nullptr) out.sync_set = node.sync_set->recorded();
        return out;
      };
      node.replication->SetClusterSource(view);
      if (!config->store.replica) {
        node.replication->SetSwitchoverHandler(
            [&node, &failover](const std::string& to, absl::Time deadline) {
              return SwitchOver(node, *failover, to, deadline);
            });
      }
      server_metrics->SetReplicationSource([&node, view] {
        metrics::ReplicationFigures figures = node.Figures();
        const replication::ReplicationService::ClusterView cluster = view();
        figures.elected = true;
        figures.term = cluster.term;
        figures.sync_set_size = cluster.sync_set.size();
        return figures;
      });
    } else {
      server_metrics->SetReplicationSource([&node] { return node.Figures(); });
    }
    LogServing(server_options, *node.server);
    if (!config->port_file.empty() && !port_file_written) {
      if (absl::Status written = WritePortFile(config->port_file, node.server->port(),
                                               server_metrics->port(), node.server->health_port());
          !written.ok()) {
        return Fail(written.message());
      }
      port_file_written = true;
    }
    // Rebuilt on the port it got (a port 0 in --listen was picked now).
    server_options.listen = WithPort(server_options.listen, node.server->port());
    base.server.listen = server_options.listen;

    std::function<bool()> role_changed;
    if (failover != nullptr) {
      role_changed = [&failover, &role_version] {
        return failover->RoleChangedSince(role_version);
      };
    }
    while (true) {
      signal_number =
          ServeUntilStopped(auth->get(), server_options.tls, node.follower.get(), role_changed);
      if (signal_number != 0 || failover == nullptr || node.follower == nullptr ||
          !RetargetInPlace(node, *failover, *follower_options, role_version, data_term)) {
        break;
      }
    }
    stop_start = absl::Now();
    if (signal_number != 0 && failover != nullptr &&
        role.kind == coordination::Role::Kind::kPrimary) {
      HandOverBeforeStopping(node, *failover);
    }
    const bool needs_snapshot = node.follower != nullptr && node.follower->needs_snapshot();
    if (signal_number != 0) {
      bloomlog::LogInfo(absl::StrCat("received ", signal_number == SIGTERM ? "SIGTERM" : "SIGINT",
                                     ": shutting down"));
    } else if (needs_snapshot) {
      bloomlog::LogWarning(
          "follower: copying a snapshot of the primary again; this server is "
          "unavailable meanwhile");
    } else {
      bloomlog::LogWarning("the cluster's primary changed: this server restarts in its new role");
    }
    server_metrics->SetReplicationSource(nullptr);
    server_metrics->SetStore(nullptr);
    if (failover != nullptr) failover->SetStore(nullptr);
    // A change of role is urgent (a new primary must take writes, a demoted one must stop),
    // and the calls in flight are mostly forwarded to a primary that is gone: they get a
    // moment, not the whole grace period, and clients retry what was cut.
    closed = node.Stop(signal_number != 0 ? absl::nullopt : absl::make_optional(kRoleChangeGrace));
    if (signal_number != 0) break;
    copy_again = needs_snapshot;
  }
  if (failover != nullptr) {
    // A planned stop hands over at once rather than after the lease's TTL.
    if (absl::Status resigned = failover->Resign(); !resigned.ok()) {
      bloomlog::LogWarning(absl::StrCat("etcd: resigning: ", resigned.ToString()));
    }
    failover.reset();
  }
  // Tear down in a fixed order on this thread rather than in destructors at return: the gRPC
  // servers (draining calls, above), the metrics listener, the store (above), and gRPC's
  // library itself, so that no gRPC or civetweb thread still runs when exit handlers (and the
  // sanitizers' checks) do.
  server_metrics.reset();
  // Channel credentials are gRPC objects too: a follower's would hold the library open.
  if (follower_options.ok()) follower_options->credentials.reset();
  if (!service::WaitForGrpcLibraryShutdown(absl::Seconds(5))) {
    bloomlog::LogWarning("gRPC had not finished shutting down after 5s; exiting anyway");
  }
  if (!closed.ok()) return Fail(absl::StrCat("closing the store: ", closed.ToString()));
  bloomlog::LogInfo(
      absl::StrCat("shut down cleanly in ", absl::FormatDuration(absl::Now() - stop_start)));
  return 0;
}
