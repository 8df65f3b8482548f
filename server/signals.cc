// Signals (server/signals.h): a self-pipe written by the handlers.
#include "server/signals.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>

namespace server {
namespace {

int signal_pipe[2] = {-1, -1};

extern "C" void OnSignal(int signal_number) {
  const char byte = static_cast<char>(signal_number);
  [[maybe_unused]] ssize_t ignored = write(signal_pipe[1], &byte, 1);
}

}  // namespace

bool InstallSignalHandlers() {
  if (pipe2(signal_pipe, O_CLOEXEC) != 0) return false;
  struct sigaction action = {};
  action.sa_handler = OnSignal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  return sigaction(SIGTERM, &action, nullptr) == 0 && sigaction(SIGINT, &action, nullptr) == 0 &&
         sigaction(SIGHUP, &action, nullptr) == 0;
}

int WaitForSignal(absl::Duration timeout) {
  pollfd fd{signal_pipe[0], POLLIN, 0};
  if (poll(&fd, 1, static_cast<int>(absl::ToInt64Milliseconds(timeout))) <= 0) return 0;
  char byte = 0;
  while (read(signal_pipe[0], &byte, 1) < 0 && errno == EINTR) {
  }
  return byte;
}

int StopSignalArrived() {
  const int signal_number = WaitForSignal(absl::ZeroDuration());
  return signal_number == SIGTERM || signal_number == SIGINT ? signal_number : 0;
}

void WakeMainLoop() {
  const char byte = 0;
  [[maybe_unused]] ssize_t ignored = write(signal_pipe[1], &byte, 1);
}

}  // namespace server
