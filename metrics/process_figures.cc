#include "metrics/process_figures.h"

#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

namespace metrics {
namespace {

// Seconds since the epoch at which the machine booted (/proc/stat's btime).
double BootTimeSeconds() {
  std::ifstream in("/proc/stat");
  std::string key;
  double value = 0;
  while (in >> key) {
    if (key == "btime" && in >> value) return value;
    in.ignore(1 << 20, '\n');
  }
  return 0;
}

uint64_t CountOpenFds() {
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return 0;
  uint64_t count = 0;
  while (const dirent* entry = readdir(dir)) {
    if (entry->d_name[0] != '.') ++count;
  }
  closedir(dir);
  return count > 0 ? count - 1 : 0;  // not the descriptor of the listing itself
}

// The inodes of this process's sockets ("socket:[inode]" links under /proc/self/fd).
std::set<uint64_t> OwnSocketInodes() {
  std::set<uint64_t> inodes;
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return inodes;
  char target[64];
  while (const dirent* entry = readdir(dir)) {
    if (entry->d_name[0] == '.') continue;
    const std::string link = std::string("/proc/self/fd/") + entry->d_name;
    const ssize_t length = readlink(link.c_str(), target, sizeof(target) - 1);
    if (length <= 0) continue;
    target[length] = '\0';
    unsigned long long inode = 0;  // NOLINT(google-runtime-int): sscanf's %llu
    if (std::sscanf(target, "socket:[%llu]", &inode) == 1) inodes.insert(inode);
  }
  closedir(dir);
  return inodes;
}

}  // namespace

std::map<int, uint64_t> InboundConnections() {
  const std::set<uint64_t> own = OwnSocketInodes();
  std::set<int> listening;
  std::map<int, uint64_t> established;  // by local port
  for (const char* table : {"/proc/self/net/tcp", "/proc/self/net/tcp6"}) {
    std::ifstream in(table);
    std::string line;
    std::getline(in, line);  // the header
    while (std::getline(in, line)) {
      // sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode
      std::istringstream fields(line);
      std::string slot, local, remote, state, queues, timer, retransmits, uid, timeout;
      uint64_t inode = 0;
      if (!(fields >> slot >> local >> remote >> state >> queues >> timer >> retransmits >> uid >>
            timeout >> inode) ||
          own.count(inode) == 0) {
        continue;
      }
      const size_t colon = local.rfind(':');
      if (colon == std::string::npos) continue;
      const int port = static_cast<int>(std::strtol(local.c_str() + colon + 1, nullptr, 16));
      if (state == "0A") listening.insert(port);  // TCP_LISTEN
      if (state == "01") ++established[port];     // TCP_ESTABLISHED
    }
  }
  std::map<int, uint64_t> inbound;
  for (int port : listening) inbound[port] = established[port];
  return inbound;
}

ProcessFigures ReadProcessFigures() {
  ProcessFigures figures;
  std::ifstream in("/proc/self/stat");
  std::string line;
  std::getline(in, line);
  // The command name (field 2) may hold spaces and parentheses: parse after its last ')'.
  const size_t close = line.rfind(')');
  if (close != std::string::npos) {
    std::istringstream fields(line.substr(close + 2));
    std::string field;
    // Fields from 3 (state): utime is 14, stime 15, starttime 22, vsize 23, rss 24.
    uint64_t utime = 0, stime = 0, start = 0, vsize = 0, rss = 0;
    for (int index = 3; index <= 24 && fields >> field; ++index) {
      const uint64_t value = std::strtoull(field.c_str(), nullptr, 10);
      if (index == 14) utime = value;
      if (index == 15) stime = value;
      if (index == 22) start = value;
      if (index == 23) vsize = value;
      if (index == 24) rss = value;
    }
    const auto ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
    figures.cpu_seconds = static_cast<double>(utime + stime) / ticks;
    figures.start_time_seconds = BootTimeSeconds() + static_cast<double>(start) / ticks;
    figures.virtual_bytes = vsize;
    figures.resident_bytes = rss * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  }
  figures.open_fds = CountOpenFds();
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0) figures.max_fds = limit.rlim_cur;
  return figures;
}

}  // namespace metrics
