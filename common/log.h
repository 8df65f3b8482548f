// Minimal level-filtered logging: one line per event on stderr, as text or JSON.
//
//   LogInfo(absl::StrCat("loaded ", n, " filters in ", absl::FormatDuration(t)));
//
// Thread-safety: all functions are thread-safe; lines from concurrent threads do not interleave.
#ifndef COMMON_LOG_H_
#define COMMON_LOG_H_

#include "absl/strings/string_view.h"

namespace bloomlog {

enum class Level { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3 };

// Parses "debug", "info", "warning" or "error"; false for anything else.
bool ParseLevel(absl::string_view text, Level& level);
// Lines below `level` are dropped. Default: kInfo.
void SetLevel(Level level);
// One JSON object per line instead of text.
void SetJson(bool json);
bool Enabled(Level level);

void Log(Level level, absl::string_view message);
inline void LogDebug(absl::string_view m) { Log(Level::kDebug, m); }
inline void LogInfo(absl::string_view m) { Log(Level::kInfo, m); }
inline void LogWarning(absl::string_view m) { Log(Level::kWarning, m); }
inline void LogError(absl::string_view m) { Log(Level::kError, m); }

}  // namespace bloomlog

#endif  // COMMON_LOG_H_
