#include "common/log.h"

#include <atomic>
#include <cstdio>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace bloomlog {
namespace {

std::atomic<int> min_level{static_cast<int>(Level::kInfo)};
std::atomic<bool> json_lines{false};

const char* LevelName(Level level) {
  switch (level) {
    case Level::kDebug:
      return "debug";
    case Level::kInfo:
      return "info";
    case Level::kWarning:
      return "warning";
    case Level::kError:
      return "error";
  }
  return "info";
}

std::string JsonEscape(absl::string_view text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          absl::StrAppend(&out, "\\u00", absl::Hex(c, absl::kZeroPad2));
        } else {
          out += c;
        }
    }
  }
  return out;
}

}  // namespace

bool ParseLevel(absl::string_view text, Level& level) {
  const std::string lower = absl::AsciiStrToLower(text);
  for (Level l : {Level::kDebug, Level::kInfo, Level::kWarning, Level::kError}) {
    if (lower == LevelName(l)) {
      level = l;
      return true;
    }
  }
  return false;
}

void SetLevel(Level level) { min_level.store(static_cast<int>(level)); }
void SetJson(bool json) { json_lines.store(json); }
bool Enabled(Level level) { return static_cast<int>(level) >= min_level.load(); }

void Log(Level level, absl::string_view message) {
  if (!Enabled(level)) return;
  const std::string time =
      absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::Now(), absl::UTCTimeZone());
  std::string line = json_lines.load()
                         ? absl::StrCat(R"({"time":")", time, R"(","level":")", LevelName(level),
                                        R"(","msg":")", JsonEscape(message), "\"}\n")
                         : absl::StrCat(time, " ", LevelName(level), " ", message, "\n");
  std::fwrite(line.data(), 1, line.size(), stderr);  // one write per line: no interleaving
}

}  // namespace bloomlog
