#include "tests/etcd_process.h"

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

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace bloomtest {
namespace {

constexpr char kEtcdBinary[] = "/usr/bin/etcd";  // Debian's etcd-server

}  // namespace

int FreeLoopbackPort() {
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

std::unique_ptr<EtcdProcess> EtcdProcess::Start(absl::Duration timeout) {
  if (access(kEtcdBinary, X_OK) != 0) {
    ADD_FAILURE() << kEtcdBinary << " is missing: install etcd-server (scripts/install-deps.sh)";
    return nullptr;
  }
  auto etcd = std::unique_ptr<EtcdProcess>(new EtcdProcess());
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
  const std::string client_url = absl::StrCat("http://127.0.0.1:", client_port_);
  const std::string peer_url = absl::StrCat("http://127.0.0.1:", peer_port);
  std::vector<std::string> args = {
      kEtcdBinary,
      "--name=test",
      "--data-dir=" + scratch_->path() + "/data",
      "--listen-client-urls=" + client_url,
      "--advertise-client-urls=" + client_url,
      "--listen-peer-urls=" + peer_url,
      "--initial-advertise-peer-urls=" + peer_url,
      "--initial-cluster=test=" + peer_url,
      // Elections and heartbeats at etcd's defaults; no metrics listener of its own.
      "--log-level=warn",
      "--logger=zap",
  };
  std::vector<char*> argv;
  argv.reserve(args.size() + 1);
  for (std::string& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  // Built before fork(): the child of a multithreaded parent may not allocate before exec.
  const pid_t pid = fork();
  if (pid == 0) {
    const int fd = open(log_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      dup2(fd, STDOUT_FILENO);
      dup2(fd, STDERR_FILENO);
    }
    execv(kEtcdBinary, argv.data());
    _exit(127);
  }
  pid_ = pid;
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    if (absl::StrContains(HttpGet(client_port_, "/health"), R"("health":"true")")) return true;
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
  if (pid_ > 0) Kill();
  if (::testing::Test::HasFailure() && !log_path_.empty()) {
    std::string log = ReadLog();
    constexpr size_t kTailBytes = 8 << 10;
    if (log.size() > kTailBytes) log = "[...]" + log.substr(log.size() - kTailBytes);
    std::fprintf(stderr, "---- etcd log ----\n%s---- end of etcd log ----\n", log.c_str());
  }
}

void EtcdProcess::Signal(int signal) {
  if (pid_ > 0) kill(pid_, signal);
}

void EtcdProcess::Kill() {
  if (pid_ <= 0) return;
  kill(pid_, SIGKILL);
  int status = 0;
  waitpid(pid_, &status, 0);
  pid_ = -1;
}

std::string EtcdProcess::ReadLog() const {
  std::ifstream in(log_path_);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace bloomtest
