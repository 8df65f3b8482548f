// This process's resource figures from /proc (Linux), for the standard process_* metrics.
//
// Thread-safety: ReadProcessFigures is thread-safe (it only reads /proc).
#ifndef METRICS_PROCESS_FIGURES_H_
#define METRICS_PROCESS_FIGURES_H_

#include <cstdint>
#include <map>

namespace metrics {

struct ProcessFigures {
  double cpu_seconds = 0;  // user + system
  uint64_t resident_bytes = 0;
  uint64_t virtual_bytes = 0;
  uint64_t open_fds = 0;
  uint64_t max_fds = 0;
  double start_time_seconds = 0;  // since the Unix epoch
};

// Fields that cannot be read stay 0.
ProcessFigures ReadProcessFigures();

// The established TCP connections this process accepted, by the port it listens on (each of
// its listening sockets, with 0 for one without connections): its sockets (/proc/self/fd)
// found in the network namespace's tables (/proc/self/net/tcp and tcp6). Empty if they cannot
// be read.
std::map<int, uint64_t> InboundConnections();

}  // namespace metrics

#endif  // METRICS_PROCESS_FIGURES_H_
