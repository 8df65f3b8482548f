// bloom-cli's commands for a sharded deployment (bloom-server --shard_map):
//   cluster shards              the shard map the pod holds: each group, where it is reached,
//                               and the slot ranges it owns
//   cluster init GROUP... [--slots=N]   the map's first version (GROUP: a group's --cluster key)
//   cluster add-group GROUP     a group joins the map, owning no slot yet
//
// Thread-safety: runs on the calling thread and prints to std::cout or stderr.
#ifndef CLIENT_CLI_CLUSTER_H_
#define CLIENT_CLI_CLUSTER_H_

#include <string>
#include <vector>

#include "client/bloom_client.h"

namespace bloomcli {

// `words`: what follows `cluster` on the command line; `slots`: --slots (empty: the default).
// Returns the exit status.
int Cluster(const bloomclient::BloomClient& client, const std::vector<std::string>& words,
            const std::string& slots, bool json);

}  // namespace bloomcli

#endif  // CLIENT_CLI_CLUSTER_H_
