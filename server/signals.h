// Signals: how bloom-server's main() learns of SIGTERM, SIGINT and SIGHUP, and of a change of
// role that must be acted on at once. The kernel delivers a signal on whichever thread it
// picks (gRPC starts threads before main), so the handler only writes the signal's number to
// a pipe, which main()'s thread reads.
//
//   if (!InstallSignalHandlers()) return Fail("cannot install signal handlers");
//   while (WaitForSignal(absl::Seconds(1)) != SIGTERM) { ... }
//
// Thread-safety: InstallSignalHandlers once, before the others; WaitForSignal and
// StopSignalArrived from one thread (main's); WakeMainLoop from any thread.
#ifndef SERVER_SIGNALS_H_
#define SERVER_SIGNALS_H_

#include "absl/time/time.h"

namespace server {

// Routes SIGTERM, SIGINT and SIGHUP to WaitForSignal; false if that failed.
bool InstallSignalHandlers();

// Waits up to `timeout` for a signal and returns its number; 0 if none came, or if
// WakeMainLoop woke it.
int WaitForSignal(absl::Duration timeout);

// SIGTERM or SIGINT if one arrived (without waiting), else 0: for loops that must stop for
// them, such as a follower's snapshot copy.
int StopSignalArrived();

// Wakes WaitForSignal without a signal (it returns 0).
void WakeMainLoop();

}  // namespace server

#endif  // SERVER_SIGNALS_H_
