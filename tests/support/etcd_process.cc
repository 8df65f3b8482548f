#include "tests/support/etcd_process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "tests/support/files.h"

namespace bloomtest {
namespace {

constexpr char kEtcdBinary[] = "/usr/bin/etcd";  // Debian's etcd-server

// Starts etcd with `args` (after the binary), its output to `log_path`; its pid.
pid_t SpawnEtcd(std::vector<std::string> args, const std::string& log_path) {
  args.insert(args.begin(), kEtcdBinary);
  std::vector<char*> argv;
  argv.reserve(args.size() + 1);
  for (std::string& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  // Built before fork(): the child of a multithreaded parent may not allocate before exec.
  const pid_t pid = fork();
  if (pid == 0) {
    const int fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      dup2(fd, STDOUT_FILENO);
      dup2(fd, STDERR_FILENO);
    }
    execv(kEtcdBinary, argv.data());
    _exit(127);
  }
  return pid;
}

void KillAndReap(pid_t& pid) {
  if (pid <= 0) return;
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  pid = -1;
}

void PrintLogTail(const std::string& title, std::string log) {
  constexpr size_t kTailBytes = 8 << 10;
  if (log.size() > kTailBytes) log = "[...]" + log.substr(log.size() - kTailBytes);
  std::fprintf(stderr, "---- %s ----\n%s---- end of %s ----\n", title.c_str(), log.c_str(),
               title.c_str());
}

}  // namespace

std::unique_ptr<EtcdCluster> EtcdCluster::Start(int members, absl::Duration timeout) {
  if (access(kEtcdBinary, X_OK) != 0) {
    ADD_FAILURE() << kEtcdBinary << " is missing: install etcd-server (scripts/install-deps.sh)";
    return nullptr;
  }
  auto cluster = std::unique_ptr<EtcdCluster>(new EtcdCluster());
  for (int attempt = 0; attempt < 3; ++attempt) {
    if (cluster->TryStart(members, timeout)) return cluster;
  }
  ADD_FAILURE() << "an etcd cluster of " << members << " did not start";
  return nullptr;
}

bool EtcdCluster::TryStart(int members, absl::Duration timeout) {
  for (Member& member : members_) KillAndReap(member.pid);
  members_.assign(members, Member{});
  scratch_ = std::make_unique<TempDir>();
  std::vector<std::string> peers;
  for (int i = 0; i < members; ++i) {
    Member& member = members_[i];
    member.name = absl::StrCat("etcd", i);
    member.client_port = FreeLoopbackPort();
    member.peer_port = FreeLoopbackPort();
    member.log_path = absl::StrCat(scratch_->path(), "/", member.name, ".log");
    peers.push_back(absl::StrCat(member.name, "=http://127.0.0.1:", member.peer_port));
  }
  initial_cluster_ = absl::StrJoin(peers, ",");
  for (Member& member : members_) {
    if (!Spawn(member)) return false;
  }
  const absl::Time deadline = absl::Now() + timeout;
  for (const Member& member : members_) {
    if (!WaitHealthy(member, deadline)) return false;
  }
  return true;
}

bool EtcdCluster::Spawn(Member& member) {
  const std::string client_url = absl::StrCat("http://127.0.0.1:", member.client_port);
  const std::string peer_url = absl::StrCat("http://127.0.0.1:", member.peer_port);
  member.pid = SpawnEtcd(
      {
          "--name=" + member.name,
          absl::StrCat("--data-dir=", scratch_->path(), "/", member.name),
          "--listen-client-urls=" + client_url,
          "--advertise-client-urls=" + client_url,
          "--listen-peer-urls=" + peer_url,
          "--initial-advertise-peer-urls=" + peer_url,
          "--initial-cluster=" + initial_cluster_,
          "--initial-cluster-state=new",  // ignored by a member restarted with its data
          "--log-level=warn",
          "--logger=zap",
      },
      member.log_path);
  return member.pid > 0;
}

bool EtcdCluster::WaitHealthy(const Member& member, absl::Time deadline) {
  while (absl::Now() < deadline) {
    if (absl::StrContains(HttpGet(member.client_port, "/health"), R"("health":"true")")) {
      return true;
    }
    int status = 0;
    if (waitpid(member.pid, &status, WNOHANG) == member.pid) return false;  // lost a port?
    absl::SleepFor(absl::Milliseconds(50));
  }
  return false;
}

EtcdCluster::~EtcdCluster() {
  for (Member& member : members_) KillAndReap(member.pid);
  if (::testing::Test::HasFailure()) {
    for (const Member& member : members_) {
      PrintLogTail(member.name + " log", ReadFile(member.log_path));
    }
  }
}

std::string EtcdCluster::endpoints() const {
  std::vector<std::string> out;
  for (const Member& member : members_) {
    out.push_back(absl::StrCat("127.0.0.1:", member.client_port));
  }
  return absl::StrJoin(out, ",");
}

void EtcdCluster::Kill(int member) { KillAndReap(members_[member].pid); }

bool EtcdCluster::Restart(int member, absl::Duration timeout) {
  Member& restarted = members_[member];
  KillAndReap(restarted.pid);
  if (!Spawn(restarted)) return false;
  return WaitHealthy(restarted, absl::Now() + timeout);
}

namespace {

// Any port free now (the kernel picks it).
int AnyFreeLoopbackPort() {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0) {
    port = ntohs(address.sin_port);
  }
  close(fd);
  return port;
}

}  // namespace

int FreeLoopbackPort() {
  // Never the same port twice in one test process: a port handed out is free until its user
  // binds it, and the kernel may hand it out again meanwhile.
  static absl::Mutex mu(absl::kConstInit);
  static auto* given = new absl::flat_hash_set<int>();
  for (int attempt = 0; attempt < 100; ++attempt) {
    const int port = AnyFreeLoopbackPort();
    absl::MutexLock lock(&mu);
    if (port == 0 || given->insert(port).second) return port;
  }
  return 0;
}

std::unique_ptr<EtcdProcess> EtcdProcess::Start(absl::Duration timeout) {
  return StartWith(EtcdSettings{}, timeout);
}

std::unique_ptr<EtcdProcess> EtcdProcess::StartWith(const EtcdSettings& settings,
                                                    absl::Duration timeout) {
  if (access(kEtcdBinary, X_OK) != 0) {
    ADD_FAILURE() << kEtcdBinary << " is missing: install etcd-server (scripts/install-deps.sh)";
    return nullptr;
  }
  auto etcd = std::unique_ptr<EtcdProcess>(new EtcdProcess());
  etcd->settings_ = settings;
  for (int attempt = 0; attempt < 3; ++attempt) {
    if (etcd->TryStart(timeout)) return etcd;
  }
  ADD_FAILURE() << "etcd did not start: " << etcd->ReadLog();
  return nullptr;
}

bool EtcdProcess::TryStart(absl::Duration timeout) {
  if (pid_ > 0) Kill();
  scratch_ = std::make_unique<TempDir>();
  log_path_ = scratch_->path() + "/etcd.log";
  client_port_ = FreeLoopbackPort();
  const int peer_port = FreeLoopbackPort();
  const bool tls = !settings_.cert_file.empty();
  const std::string client_url =
      absl::StrCat(tls ? "https" : "http", "://127.0.0.1:", client_port_);
  const std::string peer_url = absl::StrCat("http://127.0.0.1:", peer_port);
  std::vector<std::string> args = {
      "--name=test",
      "--data-dir=" + scratch_->path() + "/data",
      "--listen-client-urls=" + client_url,
      "--advertise-client-urls=" + client_url,
      "--listen-peer-urls=" + peer_url,
      "--initial-advertise-peer-urls=" + peer_url,
      "--initial-cluster=test=" + peer_url,
      // Elections and heartbeats at etcd's defaults.
      "--log-level=warn",
      "--logger=zap",
  };
  // Health is asked over plaintext HTTP: the client URL's own, or a metrics URL beside TLS.
  int health_port = client_port_;
  if (tls) {
    health_port = FreeLoopbackPort();
    args.push_back(absl::StrCat("--listen-metrics-urls=http://127.0.0.1:", health_port));
    args.push_back("--cert-file=" + settings_.cert_file);
    args.push_back("--key-file=" + settings_.key_file);
    if (!settings_.client_ca_file.empty()) {
      args.push_back("--trusted-ca-file=" + settings_.client_ca_file);
      args.push_back("--client-cert-auth");
    }
  }
  args.insert(args.end(), settings_.extra_flags.begin(), settings_.extra_flags.end());
  const pid_t pid = SpawnEtcd(std::move(args), log_path_);
  pid_ = pid;
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    if (absl::StrContains(HttpGet(health_port, "/health"), R"("health":"true")")) return true;
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {  // lost a port to someone else, perhaps
      pid_ = -1;
      return false;
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  Kill();
  return false;
}

EtcdProcess::~EtcdProcess() {
  KillAndReap(pid_);
  if (::testing::Test::HasFailure() && !log_path_.empty()) PrintLogTail("etcd log", ReadLog());
}

void EtcdProcess::Signal(int signal) {
  if (pid_ > 0) kill(pid_, signal);
}

void EtcdProcess::Kill() { KillAndReap(pid_); }

std::string EtcdProcess::ReadLog() const { return ReadFile(log_path_); }

}  // namespace bloomtest
