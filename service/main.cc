// bloom-server: persistent Bloom filters over gRPC.
//
// Every flag can also be set by an environment variable BLOOM_<FLAG> (e.g. BLOOM_DATA_DIR,
// BLOOM_LISTEN), which suits Kubernetes; a command-line flag wins over the environment.
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/container_memory.h"
#include "common/heap.h"
#include "common/log.h"
#include "common/open_files.h"
#include "google/protobuf/stubs/logging.h"
#include "metrics/metrics.h"
#include "service/auth.h"
#include "service/server.h"
#include "storage/filter_store.h"

// jemalloc's start-up options (read by jemalloc when it serves malloc, common/heap.h; unused
// otherwise): a background thread returns free pages after their decay time, so neither RSS
// nor a request's latency waits for the next allocation to do it.
extern "C" {
// NOLINTNEXTLINE: the name and type are jemalloc's interface.
const char* malloc_conf = "background_thread:true";
}

ABSL_FLAG(std::string, listen, "127.0.0.1:50051",
          "host:port to serve gRPC on; port 0 picks a free port");
ABSL_FLAG(std::string, data_dir, "./bloom-data", "directory of the RocksDB data");
ABSL_FLAG(bool, sync, false,
          "fsync the write-ahead log before acknowledging an Add (survives power loss; slower)");
ABSL_FLAG(std::string, memory_limit, "50%",
          "cache budget for filters (their bits and 416 bytes of bookkeeping each): past it the "
          "least recently used filters are written "
          "out and loaded again on use; e.g. 536870912, 512Mi, 4Gi, or a share of the "
          "container's memory limit (the machine's memory outside a container) such as 50% (the "
          "default: RocksDB, request buffers and the heap's own overhead need the rest); 0 = no "
          "limit");
ABSL_FLAG(bool, lazy_start, false,
          "start without loading any filter (only the journal is scanned); filters load on "
          "first use, so start-up time does not depend on their number. Skips the start-up "
          "checks of every filter (unreadable ones are found on use; orphaned pages stay)");
ABSL_FLAG(uint64_t, max_batch, 100'000, "most items (items + raw_items) in one request");
ABSL_FLAG(uint64_t, max_item_bytes, 64 << 10, "largest item, in bytes");
ABSL_FLAG(std::string, log_level, "info", "debug, info, warning or error");
ABSL_FLAG(bool, log_json, false, "log one JSON object per line");
ABSL_FLAG(absl::Duration, checkpoint_interval, absl::Seconds(30),
          "a filter with unpersisted changes is checkpointed at least this often");
ABSL_FLAG(absl::Duration, shutdown_grace, absl::Seconds(5),
          "on SIGTERM, how long in-flight calls may run before they are cancelled");
ABSL_FLAG(std::string, server_model, "auto",
          "retired: the server always uses gRPC's callback API (auto and callback are accepted; "
          "sync, the former thread-per-call model, is served as callback with a warning)");
ABSL_FLAG(std::string, port_file, "",
          "if set, written once serving: the gRPC port on the first line, then 'metrics <port>' "
          "and 'health <port>' lines for those listeners (for tests and tools)");
ABSL_FLAG(std::string, tls_cert_file, "",
          "PEM certificate chain for TLS; with --tls_key_file turns TLS on (re-read on change)");
ABSL_FLAG(std::string, tls_key_file, "", "PEM private key of --tls_cert_file");
ABSL_FLAG(std::string, tls_client_ca_file, "",
          "PEM CA bundle: require client certificates signed by it (mutual TLS)");
ABSL_FLAG(absl::Duration, tls_reload_interval, absl::Seconds(5),
          "how often the TLS files are checked for changes (rotation without restart)");
ABSL_FLAG(std::string, auth_token_file, "",
          "file of '<sha256 of token> <read|write> [label]' lines; if set, every call but health "
          "checking needs 'authorization: Bearer <token>' (re-read on change and on SIGHUP)");
ABSL_FLAG(std::string, open_methods, "health",
          "with --auth_token_file, the methods the main port serves without a token: health, "
          "reflection, both or none (\"\"). Reflection receives a request whole before it can check "
          "its size: open it only to clients you trust");
ABSL_FLAG(std::string, metrics_listen, "",
          "host:port to serve Prometheus metrics on (GET /metrics); empty = off");
ABSL_FLAG(std::string, health_listen, "",
          "host:port of a plaintext gRPC server answering only grpc.health.v1, for Kubernetes "
          "probes when the main port needs TLS or mTLS; empty = off");
// Defaults sized so that one connection at both limits (64 x 16 MiB of buffered requests) fits
// in a 2 GiB container beside the filters; --transport_memory bounds all connections together.
ABSL_FLAG(int32_t, max_concurrent_streams, 64, "most concurrent calls per client connection");
ABSL_FLAG(absl::Duration, max_connection_idle, absl::Minutes(5),
          "a client connection with no call in flight for this long is closed (GOAWAY; gRPC "
          "clients reconnect on their next call), so idle connections do not pile up; 0 = never");
ABSL_FLAG(std::string, max_message_bytes, "16Mi", "largest request message, e.g. 4Mi, 16Mi");
ABSL_FLAG(uint64_t, pipeline_window, 64,
          "operations a Pipeline stream reads ahead of their answers before it stops reading "
          "(back-pressure on a client that sends faster than it reads)");
ABSL_FLAG(uint64_t, max_pipeline_operations, 100'000,
          "most operations in one Pipeline message (itself and its `more`); a message with more "
          "is refused (INVALID_ARGUMENT) before it is parsed");
ABSL_FLAG(std::string, transport_memory, "256Mi",
          "most bytes gRPC may buffer for received requests, over all connections (its "
          "ResourceQuota); past it, flow-control windows shrink and calls are cancelled "
          "(RESOURCE_EXHAUSTED). Bytes or a share of the container's memory (10%); 0 = no bound");
ABSL_FLAG(uint64_t, max_transfers, 16,
          "most Export and Import streams at once; more get RESOURCE_EXHAUSTED");
ABSL_FLAG(uint64_t, max_transfers_per_client, 4,
          "of --max_transfers, most at once for one client (a token's label, or else the peer's "
          "address); more get RESOURCE_EXHAUSTED");
ABSL_FLAG(std::string, transfer_min_rate, "64Ki",
          "bytes a second an Export or Import must move, averaged over --transfer_idle_timeout, "
          "or it is cancelled (ABORTED) and what it held released; e.g. 64Ki, 1Mi; 0 = any");
ABSL_FLAG(absl::Duration, transfer_idle_timeout, absl::Seconds(30),
          "an Export whose client stops reading, or an Import that sends no chunk, for this long "
          "is cancelled (ABORTED) and what it held released; 0 = never");
ABSL_FLAG(int32_t, max_threads, 0,
          "retired with the sync server model, whose threads it bounded; ignored (with a "
          "warning) if set");

namespace {

constexpr const char* kFlagNames[] = {"listen",
                                      "data_dir",
                                      "sync",
                                      "memory_limit",
                                      "lazy_start",
                                      "max_batch",
                                      "max_item_bytes",
                                      "log_level",
                                      "log_json",
                                      "checkpoint_interval",
                                      "shutdown_grace",
                                      "port_file",
                                      "server_model",
                                      "tls_cert_file",
                                      "tls_key_file",
                                      "tls_client_ca_file",
                                      "tls_reload_interval",
                                      "auth_token_file",
                                      "open_methods",
                                      "metrics_listen",
                                      "health_listen",
                                      "max_concurrent_streams",
                                      "max_connection_idle",
                                      "max_message_bytes",
                                      "max_threads",
                                      "transport_memory",
                                      "max_transfers",
                                      "transfer_idle_timeout",
                                      "pipeline_window",
                                      "max_pipeline_operations",
                                      "max_transfers_per_client",
                                      "transfer_min_rate"};

// Applies BLOOM_<FLAG> environment variables as flag values; the command line parsed later
// overrides them.
bool ApplyEnvironment() {
  for (const char* name : kFlagNames) {
    const std::string variable = absl::StrCat("BLOOM_", absl::AsciiStrToUpper(name));
    const char* value = std::getenv(variable.c_str());
    if (value == nullptr) continue;
    absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
    std::string error;
    if (flag == nullptr || !flag->ParseFrom(value, &error)) {
      std::fprintf(stderr, "bloom-server: bad %s='%s': %s\n", variable.c_str(), value,
                   error.c_str());
      return false;
    }
  }
  return true;
}

// "0", "1048576", "512Mi", "4Gi", "1G" (powers of 1000 without the i).
bool ParseBytes(absl::string_view text, uint64_t& bytes) {
  struct Suffix {
    const char* text;
    uint64_t factor;
  };
  constexpr Suffix kSuffixes[] = {
      {"Ki", 1ULL << 10}, {"Mi", 1ULL << 20}, {"Gi", 1ULL << 30},     {"Ti", 1ULL << 40},
      {"K", 1000ULL},     {"M", 1000'000ULL}, {"G", 1000'000'000ULL}, {"T", 1000'000'000'000ULL}};
  uint64_t factor = 1;
  for (const Suffix& s : kSuffixes) {
    if (absl::EndsWith(text, s.text)) {
      factor = s.factor;
      text.remove_suffix(std::strlen(s.text));
      break;
    }
  }
  uint64_t value = 0;
  if (!absl::SimpleAtoi(text, &value) || (value != 0 && factor > UINT64_MAX / value)) return false;
  bytes = value * factor;
  return true;
}

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

// "50%": that share of `container`; otherwise ParseBytes.
bool ParseMemoryLimit(absl::string_view text, const bloomsys::ContainerMemory& container,
                      uint64_t& bytes) {
  if (absl::ConsumeSuffix(&text, "%")) {
    double percent = 0;
    if (!absl::SimpleAtod(text, &percent) || !(percent > 0 && percent <= 100)) return false;
    bytes = static_cast<uint64_t>(static_cast<double>(container.bytes) * percent / 100);
    return true;
  }
  return ParseBytes(text, bytes);
}

int Fail(absl::string_view message) {
  bloomlog::LogError(message);
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  // libprotobuf logs an ERROR line for every request whose string fields are not UTF-8, which
  // the server serves anyway (protos/wire/items_as_bytes.h): a client could fill the log with
  // them. Parse complaints are dropped; anything else goes to the server's log.
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
#ifdef NDEBUG
  // Debian's Abseil is built with mutex deadlock detection on, which keeps a lock graph on
  // every Lock (about 2% of a batched query's CPU). The unit tests keep it; release servers
  // do not pay for it.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
#endif
  absl::SetProgramUsageMessage(
      "Persistent Bloom filters over gRPC.\n"
      "Flags may also be set as BLOOM_<FLAG> environment variables, e.g. BLOOM_DATA_DIR.");
  if (!ApplyEnvironment()) return 2;
  absl::ParseCommandLine(argc, argv);

  bloomlog::Level level;
  if (!bloomlog::ParseLevel(absl::GetFlag(FLAGS_log_level), level)) {
    std::fprintf(stderr, "bloom-server: --log_level must be debug, info, warning or error\n");
    return 2;
  }
  bloomlog::SetLevel(level);
  bloomlog::SetJson(absl::GetFlag(FLAGS_log_json));
  // Found once: the budget and the transport's share are both cut from it, and the log says
  // where it came from (a wrong container size is how a server gets OOM-killed in a loop).
  const bloomsys::ContainerMemory container = bloomsys::FindContainerMemory();
  uint64_t memory_limit = 0;
  if (!ParseMemoryLimit(absl::GetFlag(FLAGS_memory_limit), container, memory_limit)) {
    std::fprintf(stderr,
                 "bloom-server: --memory_limit must be bytes (536870912, 512Mi) or a share of "
                 "the container's memory (50%%)\n");
    return 2;
  }
  if (absl::GetFlag(FLAGS_max_batch) == 0 || absl::GetFlag(FLAGS_max_item_bytes) == 0 ||
      absl::GetFlag(FLAGS_pipeline_window) == 0 || absl::GetFlag(FLAGS_max_transfers) == 0 ||
      absl::GetFlag(FLAGS_max_pipeline_operations) == 0 ||
      absl::GetFlag(FLAGS_max_transfers_per_client) == 0 ||
      absl::GetFlag(FLAGS_transfer_idle_timeout) < absl::ZeroDuration()) {
    std::fprintf(stderr,
                 "bloom-server: --max_batch, --max_item_bytes, --pipeline_window, "
                 "--max_pipeline_operations, --max_transfers and --max_transfers_per_client must "
                 "be positive, "
                 "--transfer_idle_timeout not negative\n");
    return 2;
  }
  uint64_t max_message_bytes = 0;
  if (!ParseBytes(absl::GetFlag(FLAGS_max_message_bytes), max_message_bytes) ||
      max_message_bytes < 1024 || max_message_bytes > INT32_MAX) {
    std::fprintf(stderr, "bloom-server: --max_message_bytes must be 1Ki to 2Gi, e.g. 64Mi\n");
    return 2;
  }
  uint64_t transport_memory = 0;
  if (!ParseMemoryLimit(absl::GetFlag(FLAGS_transport_memory), container, transport_memory) ||
      transport_memory > INT64_MAX) {
    std::fprintf(stderr,
                 "bloom-server: --transport_memory must be bytes (268435456, 256Mi) or a share "
                 "of the container's memory (10%%)\n");
    return 2;
  }
  uint64_t transfer_min_rate = 0;
  if (!ParseBytes(absl::GetFlag(FLAGS_transfer_min_rate), transfer_min_rate)) {
    std::fprintf(stderr, "bloom-server: --transfer_min_rate must be bytes a second, e.g. 64Ki\n");
    return 2;
  }
  if (absl::GetFlag(FLAGS_max_concurrent_streams) < 1 ||
      absl::GetFlag(FLAGS_max_connection_idle) < absl::ZeroDuration()) {
    std::fprintf(stderr,
                 "bloom-server: --max_concurrent_streams must be positive, "
                 "--max_connection_idle not negative\n");
    return 2;
  }

  // Security settings are checked before the store opens, so a bad file fails fast.
  service::TlsOptions tls;
  tls.cert_file = absl::GetFlag(FLAGS_tls_cert_file);
  tls.key_file = absl::GetFlag(FLAGS_tls_key_file);
  tls.client_ca_file = absl::GetFlag(FLAGS_tls_client_ca_file);
  tls.reload_interval = absl::GetFlag(FLAGS_tls_reload_interval);
  if (!tls.client_ca_file.empty() && !tls.enabled()) {
    return Fail("--tls_client_ca_file needs --tls_cert_file and --tls_key_file");
  }
  if (tls.enabled()) {
    if (absl::Status checked = service::CheckTlsFiles(tls); !checked.ok()) {
      return Fail(absl::StrCat("TLS: ", checked.message()));
    }
  }
  std::unique_ptr<service::TokenAuthenticator> auth;
  if (const std::string token_file = absl::GetFlag(FLAGS_auth_token_file); !token_file.empty()) {
    absl::StatusOr<std::unique_ptr<service::TokenAuthenticator>> loaded =
        service::TokenAuthenticator::Load(token_file);
    if (!loaded.ok()) return Fail(absl::StrCat("auth: ", loaded.status().message()));
    auth = std::move(*loaded);
    if (auth->size() == 0) {
      bloomlog::LogWarning(absl::StrCat("the token file ", token_file,
                                        " holds no tokens: every call but health is refused"));
    }
  }

  absl::StatusOr<service::OpenMethods> open_methods =
      service::ParseOpenMethods(absl::GetFlag(FLAGS_open_methods));
  if (!open_methods.ok())
    return Fail(absl::StrCat("--open_methods: ", open_methods.status().message()));

  if (!InstallShutdownHandlers()) return Fail("cannot install signal handlers");
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

  const std::string data_dir = absl::GetFlag(FLAGS_data_dir);
  bloomlog::LogInfo(absl::StrCat("starting bloom-server: data_dir=", data_dir,
                                 " sync=", absl::GetFlag(FLAGS_sync) ? "true" : "false",
                                 " memory_limit=", memory_limit,
                                 " allocator=", bloomheap::AllocatorName()));
  storage::StoreOptions store_options;
  store_options.data_dir = data_dir;
  store_options.sync = absl::GetFlag(FLAGS_sync);
  store_options.memory_limit_bytes = memory_limit;
  store_options.checkpoint_interval = absl::GetFlag(FLAGS_checkpoint_interval);
  store_options.lazy_start = absl::GetFlag(FLAGS_lazy_start);
  absl::StatusOr<std::unique_ptr<storage::FilterStore>> store =
      storage::FilterStore::Open(store_options);
  if (!store.ok()) return Fail(absl::StrCat("cannot open the store: ", store.status().ToString()));
  const storage::LoadReport& report = (*store)->load_report();
  bloomlog::LogInfo(absl::StrCat(
      "loaded ", report.filters, " filters (", report.pages, " pages, ", report.journal_records,
      " journal records, ", report.unreadable, " unreadable, ", report.not_loaded,
      " larger than the memory limit, ", report.cold, " cold (on disk until used), ",
      (*store)->memory_used(), " bytes) in ", absl::FormatDuration(report.elapsed)));

  std::unique_ptr<metrics::ServerMetrics> server_metrics =
      metrics::ServerMetrics::Create(store->get());
  if (const std::string listen = absl::GetFlag(FLAGS_metrics_listen); !listen.empty()) {
    if (absl::Status serving = server_metrics->Serve(listen); !serving.ok()) {
      return Fail(serving.ToString());
    }
    bloomlog::LogInfo(absl::StrCat("serving metrics on http://", listen, "/metrics (port ",
                                   server_metrics->port(), ")"));
  }

  service::ServerOptions server_options;
  server_options.listen = absl::GetFlag(FLAGS_listen);
  server_options.tls = tls;
  server_options.health_listen = absl::GetFlag(FLAGS_health_listen);
  server_options.hooks.auth = auth.get();
  server_options.open_methods = *open_methods;
  // Without a metrics listener nobody reads the figures: skip recording them per call.
  if (server_metrics->port() != 0) server_options.hooks.metrics = server_metrics.get();
  server_options.max_concurrent_streams = absl::GetFlag(FLAGS_max_concurrent_streams);
  server_options.max_message_bytes = static_cast<int>(max_message_bytes);
  server_options.max_connection_idle = absl::GetFlag(FLAGS_max_connection_idle);
  server_options.transport_memory_bytes = static_cast<int64_t>(transport_memory);
  server_options.limits.max_batch = absl::GetFlag(FLAGS_max_batch);
  server_options.limits.max_item_bytes = absl::GetFlag(FLAGS_max_item_bytes);
  server_options.limits.pipeline_window = absl::GetFlag(FLAGS_pipeline_window);
  server_options.limits.max_pipeline_operations = absl::GetFlag(FLAGS_max_pipeline_operations);
  server_options.limits.max_transfers = absl::GetFlag(FLAGS_max_transfers);
  server_options.limits.max_transfers_per_client = absl::GetFlag(FLAGS_max_transfers_per_client);
  server_options.limits.transfer_idle_timeout = absl::GetFlag(FLAGS_transfer_idle_timeout);
  server_options.limits.transfer_min_bytes_per_second = transfer_min_rate;
  server_options.shutdown_grace = absl::GetFlag(FLAGS_shutdown_grace);
  const std::string model = absl::GetFlag(FLAGS_server_model);
  if (model != "auto" && model != "callback" && model != "sync") {
    return Fail("--server_model must be auto, callback or sync (retired: served as callback)");
  }
  if (model == "sync") {
    bloomlog::LogWarning(
        "--server_model=sync is retired: serving with the callback model (with --sync, adds are "
        "answered after a shared fsync without holding a thread each); drop the flag");
  }
  if (absl::GetFlag(FLAGS_max_threads) != 0) {
    bloomlog::LogWarning("--max_threads is retired with the sync server model and has no effect");
  }
  absl::StatusOr<std::unique_ptr<service::BloomServer>> server =
      service::BloomServer::Start(store->get(), server_options);
  if (!server.ok()) return Fail(server.status().ToString());
  bloomlog::LogInfo(absl::StrCat(
      "serving on ", server_options.listen, " (port ", (*server)->port(), ", callback model, ",
      tls.enabled() ? (tls.client_ca_file.empty() ? "TLS" : "mutual TLS") : "plaintext",
      auth != nullptr ? ", token auth" : ", no auth", ")"));
  if (!server_options.health_listen.empty()) {
    bloomlog::LogInfo(absl::StrCat("serving health checks on ", server_options.health_listen,
                                   " (port ", (*server)->health_port(), ", plaintext)"));
  }
  if (!IsLoopback(server_options.listen)) {
    if (!tls.enabled()) {
      bloomlog::LogWarning(
          absl::StrCat("listening on the non-loopback address ", server_options.listen,
                       " without TLS: traffic", auth != nullptr ? " and tokens" : "",
                       " can be read on the network; set --tls_cert_file and --tls_key_file"));
    }
    if (auth == nullptr) {
      bloomlog::LogWarning(absl::StrCat("listening on the non-loopback address ",
                                        server_options.listen,
                                        " without authentication: anyone who can reach it may "
                                        "read and write every filter; set --auth_token_file"));
    }
  }
  const std::string port_file = absl::GetFlag(FLAGS_port_file);
  if (!port_file.empty()) {
    // Write then rename, so a reader never sees a half-written file.
    const std::string tmp = port_file + ".tmp";
    {
      std::ofstream out(tmp);
      out << (*server)->port() << "\n";
      if (server_metrics->port() != 0) out << "metrics " << server_metrics->port() << "\n";
      if ((*server)->health_port() != 0) out << "health " << (*server)->health_port() << "\n";
    }
    if (std::rename(tmp.c_str(), port_file.c_str()) != 0) {
      return Fail(absl::StrCat("cannot write --port_file ", port_file));
    }
  }

  int signal_number = 0;
  while (signal_number != SIGTERM && signal_number != SIGINT) {
    signal_number = WaitForSignal(absl::Seconds(1));
    ReloadCredentials(auth.get(), tls, signal_number == SIGHUP);
  }
  const absl::Time stop_start = absl::Now();
  bloomlog::LogInfo(absl::StrCat("received ", signal_number == SIGTERM ? "SIGTERM" : "SIGINT",
                                 ": shutting down"));
  // Tear down in a fixed order on this thread rather than in destructors at return: the gRPC
  // servers (draining calls), the metrics listener (its scrapes read the store), the store, and
  // gRPC's library itself, so that no gRPC or civetweb thread still runs when exit handlers
  // (and the sanitizers' checks) do.
  (*server)->Shutdown();
  server->reset();
  server_metrics.reset();
  const absl::Status closed = (*store)->Close();
  if (!service::WaitForGrpcLibraryShutdown(absl::Seconds(5))) {
    bloomlog::LogWarning("gRPC had not finished shutting down after 5s; exiting anyway");
  }
  if (!closed.ok()) return Fail(absl::StrCat("closing the store: ", closed.ToString()));
  bloomlog::LogInfo(
      absl::StrCat("shut down cleanly in ", absl::FormatDuration(absl::Now() - stop_start)));
  return 0;
}
