#include "metrics/process_figures.h"

#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
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

}  // namespace

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
