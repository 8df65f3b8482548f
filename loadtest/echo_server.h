// The floor under bloom-server: a bare bloom.v1 service on gRPC's callback API that answers
// Add, MightContain and Pipeline operations (packed ones in a message's `more` too, as
// bloom-server answers them) without any filter work (every item "present", every add "new").
// Same messages, same transport, same threading as bloom-server's callback model, nothing
// else: what gRPC and protobuf alone cost per call and per stream message.
// bloom-bench drives it like a bloom-server (`bloom-bench --serve_echo=ADDRESS` runs it), so
// compare.sh measures the floor beside us in every run.
//
// Thread-safety: RunEchoServer blocks its caller; the service is thread-safe (stateless).
#ifndef LOADTEST_ECHO_SERVER_H_
#define LOADTEST_ECHO_SERVER_H_

#include <string>

namespace loadtest {

// Serves on `listen` (port 0 picks one; written to `port_file` if not empty) until SIGTERM or
// SIGINT. Returns the process exit status.
int RunEchoServer(const std::string& listen, const std::string& port_file);

}  // namespace loadtest

#endif  // LOADTEST_ECHO_SERVER_H_
