// bloom-cli's replication commands: `replication` (a pod's role and figures) and `switchover`
// (move the primary of a cluster that elects it through etcd).
//
// Thread-safety: each runs on the calling thread and prints to std::cout or stderr.
#ifndef CLIENT_CLI_REPLICATION_H_
#define CLIENT_CLI_REPLICATION_H_

#include <string>

#include "client/bloom_client.h"

namespace bloomcli {

// bloom-cli replication: bloom.replication.v1.ReplicationService/Status, printed (as JSON with
// `json`). Returns the exit status.
int ReplicationStatus(bloomclient::BloomClient& client, bool json);

// bloom-cli switchover: asks the primary (found through the pod `client` talks to, `server`)
// to hand over to `to` (empty: the follower holding the most), then waits until a pod reports
// the new primary in a later term. Returns the exit status.
int Switchover(const bloomclient::BloomClient& client, const std::string& server,
               const bloomclient::ClientOptions& options, const std::string& to, bool json);

}  // namespace bloomcli

#endif  // CLIENT_CLI_REPLICATION_H_
