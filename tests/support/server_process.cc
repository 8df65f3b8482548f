#include "tests/support/server_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace bloomtest {
namespace {

// Everything the child needs is built before fork(): after it, a multithreaded parent's child
// may only make async-signal-safe calls (no allocation) until exec.
pid_t SpawnProcess(const std::vector<std::string>& args, const std::vector<std::string>& env,
                   const std::string& log_path) {
  std::vector<std::string> argv_storage = {BLOOM_SERVER_PATH};
  argv_storage.insert(argv_storage.end(), args.begin(), args.end());
  std::vector<std::string> env_storage(env.begin(), env.end());
  for (char** e = environ; *e != nullptr; ++e) env_storage.emplace_back(*e);
  std::vector<char*> argv, envp;
  for (std::string& a : argv_storage) argv.push_back(a.data());
  for (std::string& e : env_storage) envp.push_back(e.data());
  argv.push_back(nullptr);
  envp.push_back(nullptr);
  const pid_t pid = fork();
  if (pid != 0) return pid;
  const int fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd >= 0) {
    dup2(fd, STDOUT_FILENO);
    dup2(fd, STDERR_FILENO);
  }
  execve(BLOOM_SERVER_PATH, argv.data(), envp.data());
  _exit(127);
}

int DecodeWaitStatus(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return -WTERMSIG(status);
  return -1000;
}

}  // namespace

std::unique_ptr<ServerProcess> ServerProcess::Start(const std::string& data_dir,
                                                    const std::vector<std::string>& args,
                                                    const std::vector<std::string>& env,
                                                    absl::Duration timeout) {
  auto server = std::unique_ptr<ServerProcess>(new ServerProcess());
  server->scratch_ = std::make_unique<TempDir>();
  const std::string port_file = server->scratch_->path() + "/port";
  server->log_path_ = server->scratch_->path() + "/server.log";
  std::vector<std::string> all = {"--listen=127.0.0.1:0", "--data_dir=" + data_dir,
                                  "--port_file=" + port_file};
  all.insert(all.end(), args.begin(), args.end());
  server->pid_ = SpawnProcess(all, env, server->log_path_);
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    std::ifstream in(port_file);
    int port = 0;
    if (in >> port && port > 0) {
      server->port_ = port;
      std::string listener;
      int other = 0;
      while (in >> listener >> other) {
        if (listener == "metrics") server->metrics_port_ = other;
        if (listener == "health") server->health_port_ = other;
      }
      return server;
    }
    int status = 0;
    if (waitpid(server->pid_, &status, WNOHANG) == server->pid_) {
      server->pid_ = -1;
      ADD_FAILURE() << "bloom-server exited early: " << server->ReadLog();
      return nullptr;
    }
    absl::SleepFor(absl::Milliseconds(10));
  }
  ADD_FAILURE() << "bloom-server did not start in time: " << server->ReadLog();
  return nullptr;
}

std::unique_ptr<ServerProcess> ServerProcess::Spawn(const std::string& data_dir,
                                                    const std::vector<std::string>& args) {
  auto server = std::unique_ptr<ServerProcess>(new ServerProcess());
  server->scratch_ = std::make_unique<TempDir>();
  server->log_path_ = server->scratch_->path() + "/server.log";
  std::vector<std::string> all = {"--listen=127.0.0.1:0", "--data_dir=" + data_dir};
  all.insert(all.end(), args.begin(), args.end());
  server->pid_ = SpawnProcess(all, {}, server->log_path_);
  return server;
}

namespace {

// Whether every thread of `pid` is stopped (state T in /proc/PID/task/*/stat).
bool AllThreadsStopped(pid_t pid) {
  std::error_code error;
  const std::filesystem::path tasks = absl::StrCat("/proc/", pid, "/task");
  for (const auto& task : std::filesystem::directory_iterator(tasks, error)) {
    std::ifstream stat(task.path() / "stat");
    std::string line;
    std::getline(stat, line);
    const size_t close = line.rfind(')');  // the state follows "(comm) "
    if (close == std::string::npos || close + 2 >= line.size()) return false;
    if (line[close + 2] != 'T' && line[close + 2] != 't') return false;
  }
  return !error;
}

}  // namespace

void ServerProcess::Signal(int signal) {
  if (pid_ <= 0) return;
  kill(pid_, signal);
  // kill() returns before a thread running on another core has stopped: a test that stops a
  // server and then writes must not find it still answering.
  if (signal != SIGSTOP) return;
  const absl::Time deadline = absl::Now() + absl::Seconds(5);
  while (!AllThreadsStopped(pid_) && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(1));
}

ServerProcess::~ServerProcess() {
  if (pid_ > 0) Kill();
  // A failing test shows what the server said: ctest prints the test's output on failure, and
  // the log itself goes away with scratch_.
  if (::testing::Test::HasFailure()) PrintLogTail("the test failed");
}

void ServerProcess::PrintLogTail(absl::string_view why) const {
  if (log_path_.empty()) return;
  std::string log = ReadLog();
  constexpr size_t kTailBytes = 16 << 10;
  if (log.size() > kTailBytes) log = "[...]" + log.substr(log.size() - kTailBytes);
  std::fprintf(stderr, "---- bloom-server log (%s), %s ----\n%s---- end of log ----\n",
               std::string(why).c_str(), log_path_.c_str(), log.c_str());
}

std::string ServerProcess::ReadLog() const {
  std::ifstream in(log_path_);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

int ServerProcess::WaitForExit(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  int status = 0;
  while (absl::Now() < deadline) {
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return DecodeWaitStatus(status);
    }
    absl::SleepFor(absl::Milliseconds(5));
  }
  kill(pid_, SIGKILL);
  waitpid(pid_, &status, 0);
  pid_ = -1;
  ADD_FAILURE() << "bloom-server did not exit in time";
  return -1000;
}

bool ServerProcess::Exited() {
  if (pid_ <= 0) return true;
  int status = 0;
  if (waitpid(pid_, &status, WNOHANG) != pid_) return false;
  pid_ = -1;
  PrintLogTail(absl::StrCat("exited by itself, status ", DecodeWaitStatus(status)));
  return true;
}

int ServerProcess::Terminate(absl::Duration timeout) {
  if (pid_ <= 0) return -1000;
  kill(pid_, SIGTERM);
  const int status = WaitForExit(timeout);
  if (status != 0) PrintLogTail(absl::StrCat("exit status ", status, " after SIGTERM"));
  return status;
}

void ServerProcess::Kill() {
  if (pid_ <= 0) return;
  kill(pid_, SIGKILL);
  int status = 0;
  waitpid(pid_, &status, 0);
  pid_ = -1;
}

int ServerProcess::RunToExit(const std::vector<std::string>& args, std::string* output,
                             absl::Duration timeout) {
  ServerProcess process;
  process.scratch_ = std::make_unique<TempDir>();
  process.log_path_ = process.scratch_->path() + "/server.log";
  process.pid_ = SpawnProcess(args, {}, process.log_path_);
  const int status = process.WaitForExit(timeout);
  if (output != nullptr) *output = process.ReadLog();
  return status;
}

namespace {

uint64_t StatusFieldKb(pid_t pid, absl::string_view field) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(in, line)) {
    if (absl::StartsWith(line, field)) {
      uint64_t kb = 0;
      std::istringstream(line.substr(field.size())) >> kb;
      return kb;
    }
  }
  return 0;
}

}  // namespace

uint64_t ServerProcess::ResidentKb() const { return StatusFieldKb(pid_, "VmRSS:"); }
uint64_t ServerProcess::PeakResidentKb() const { return StatusFieldKb(pid_, "VmHWM:"); }

}  // namespace bloomtest
