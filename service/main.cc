// bloom-server: persistent Bloom filters over gRPC.
//
// Every flag can also be set by an environment variable BLOOM_<FLAG> (e.g. BLOOM_DATA_DIR,
// BLOOM_LISTEN), which suits Kubernetes; a command-line flag wins over the environment.
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

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
#include "absl/time/clock.h"
#include "common/log.h"
#include "service/server.h"
#include "storage/filter_store.h"

ABSL_FLAG(std::string, listen, "127.0.0.1:50051",
          "host:port to serve gRPC on; port 0 picks a free port");
ABSL_FLAG(std::string, data_dir, "./bloom-data", "directory of the RocksDB data");
ABSL_FLAG(bool, sync, false,
          "fsync the write-ahead log before acknowledging an Add (survives power loss; slower)");
ABSL_FLAG(std::string, memory_limit, "0",
          "bytes of filter bits the server may hold, e.g. 536870912, 512Mi, 4Gi, or a share of "
          "the container's memory limit such as 75%; 0 = no limit");
ABSL_FLAG(uint64_t, max_batch, 100'000, "most items (items + raw_items) in one request");
ABSL_FLAG(uint64_t, max_item_bytes, 64 << 10, "largest item, in bytes");
ABSL_FLAG(std::string, log_level, "info", "debug, info, warning or error");
ABSL_FLAG(bool, log_json, false, "log one JSON object per line");
ABSL_FLAG(absl::Duration, checkpoint_interval, absl::Seconds(30),
          "a filter with unpersisted changes is checkpointed at least this often");
ABSL_FLAG(absl::Duration, shutdown_grace, absl::Seconds(5),
          "on SIGTERM, how long in-flight calls may run before they are cancelled");
ABSL_FLAG(std::string, server_model, "sync",
          "gRPC server API: sync (a pool thread per call) or callback (unary calls inline on "
          "gRPC's threads); see the README's performance section");
ABSL_FLAG(std::string, port_file, "",
          "if set, the bound port is written to this file once serving (for tests and tools)");

namespace {

constexpr const char* kFlagNames[] = {"listen",         "data_dir",  "sync",
                                      "memory_limit",   "max_batch", "max_item_bytes",
                                      "log_level",      "log_json",  "checkpoint_interval",
                                      "shutdown_grace", "port_file", "server_model"};

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
  return sigaction(SIGTERM, &action, nullptr) == 0 && sigaction(SIGINT, &action, nullptr) == 0;
}

int WaitForShutdownSignal() {
  char byte = 0;
  while (read(shutdown_pipe[0], &byte, 1) < 0 && errno == EINTR) {
  }
  return byte;
}

// The memory this process may use: $BLOOM_CONTAINER_MEMORY_BYTES (Kubernetes' downward API,
// resourceFieldRef limits.memory), else the cgroup v2 or v1 limit, else physical memory.
uint64_t ContainerMemoryBytes() {
  uint64_t bytes = 0;
  if (const char* env = std::getenv("BLOOM_CONTAINER_MEMORY_BYTES");
      env != nullptr && absl::SimpleAtoi(env, &bytes) && bytes > 0) {
    return bytes;
  }
  for (const char* path :
       {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}) {
    std::ifstream in(path);
    std::string text;
    // "max" (v2) or a huge number (v1) mean no limit.
    if (in >> text && absl::SimpleAtoi(text, &bytes) && bytes > 0 && bytes < (1ULL << 60)) {
      return bytes;
    }
  }
  return static_cast<uint64_t>(sysconf(_SC_PHYS_PAGES)) *
         static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

// "75%": that share of ContainerMemoryBytes(); otherwise ParseBytes.
bool ParseMemoryLimit(absl::string_view text, uint64_t& bytes) {
  if (absl::ConsumeSuffix(&text, "%")) {
    double percent = 0;
    if (!absl::SimpleAtod(text, &percent) || !(percent > 0 && percent <= 100)) return false;
    bytes = static_cast<uint64_t>(static_cast<double>(ContainerMemoryBytes()) * percent / 100);
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
  uint64_t memory_limit = 0;
  if (!ParseMemoryLimit(absl::GetFlag(FLAGS_memory_limit), memory_limit)) {
    std::fprintf(stderr,
                 "bloom-server: --memory_limit must be bytes (536870912, 512Mi) or a share of "
                 "the container's memory (75%%)\n");
    return 2;
  }
  if (absl::GetFlag(FLAGS_max_batch) == 0 || absl::GetFlag(FLAGS_max_item_bytes) == 0) {
    std::fprintf(stderr, "bloom-server: --max_batch and --max_item_bytes must be positive\n");
    return 2;
  }

  if (!InstallShutdownHandlers()) return Fail("cannot install signal handlers");

  const std::string data_dir = absl::GetFlag(FLAGS_data_dir);
  bloomlog::LogInfo(absl::StrCat("starting bloom-server: data_dir=", data_dir,
                                 " sync=", absl::GetFlag(FLAGS_sync) ? "true" : "false",
                                 " memory_limit=", memory_limit));
  storage::StoreOptions store_options;
  store_options.data_dir = data_dir;
  store_options.sync = absl::GetFlag(FLAGS_sync);
  store_options.memory_limit_bytes = memory_limit;
  store_options.checkpoint_interval = absl::GetFlag(FLAGS_checkpoint_interval);
  absl::StatusOr<std::unique_ptr<storage::FilterStore>> store =
      storage::FilterStore::Open(store_options);
  if (!store.ok()) return Fail(absl::StrCat("cannot open the store: ", store.status().ToString()));
  const storage::LoadReport& report = (*store)->load_report();
  bloomlog::LogInfo(absl::StrCat("loaded ", report.filters, " filters (", report.pages, " pages, ",
                                 report.journal_records, " journal records, ", report.unreadable,
                                 " unreadable, ", (*store)->memory_used(), " bytes) in ",
                                 absl::FormatDuration(report.elapsed)));

  service::ServerOptions server_options;
  server_options.listen = absl::GetFlag(FLAGS_listen);
  server_options.limits.max_batch = absl::GetFlag(FLAGS_max_batch);
  server_options.limits.max_item_bytes = absl::GetFlag(FLAGS_max_item_bytes);
  server_options.shutdown_grace = absl::GetFlag(FLAGS_shutdown_grace);
  const std::string model = absl::GetFlag(FLAGS_server_model);
  if (model == "callback") {
    server_options.model = service::ServerModel::kCallback;
  } else if (model != "sync") {
    return Fail("--server_model must be sync or callback");
  }
  absl::StatusOr<std::unique_ptr<service::BloomServer>> server =
      service::BloomServer::Start(store->get(), server_options);
  if (!server.ok()) return Fail(server.status().ToString());
  bloomlog::LogInfo(
      absl::StrCat("serving on ", server_options.listen, " (port ", (*server)->port(), ")"));
  const std::string port_file = absl::GetFlag(FLAGS_port_file);
  if (!port_file.empty()) {
    // Write then rename, so a reader never sees a half-written file.
    const std::string tmp = port_file + ".tmp";
    std::ofstream(tmp) << (*server)->port() << "\n";
    if (std::rename(tmp.c_str(), port_file.c_str()) != 0) {
      return Fail(absl::StrCat("cannot write --port_file ", port_file));
    }
  }

  const int signal_number = WaitForShutdownSignal();
  const absl::Time stop_start = absl::Now();
  bloomlog::LogInfo(absl::StrCat("received ", signal_number == SIGTERM ? "SIGTERM" : "SIGINT",
                                 ": shutting down"));
  (*server)->Shutdown();
  if (absl::Status closed = (*store)->Close(); !closed.ok()) {
    return Fail(absl::StrCat("closing the store: ", closed.ToString()));
  }
  bloomlog::LogInfo(
      absl::StrCat("shut down cleanly in ", absl::FormatDuration(absl::Now() - stop_start)));
  return 0;
}
