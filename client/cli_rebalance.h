// bloom-cli cluster rebalance: evens a sharded deployment's groups by the bytes of their filters,
// one slot move after another (cli_move.h runs each), as rebalance_plan.h plans them: from
// the heaviest group to the lightest, until every group is within the tolerance of the mean,
// with at most --max-filters filters in a move (a move's write pause grows with its filters).
// Each group's bytes are what its primary's List says of its filters (size_bytes), by slot.
// With --dry-run it prints the first move and changes nothing. Killed, it leaves at most one
// move in progress: `cluster move` with the same slots resumes or aborts it, and a rebalance
// run again plans from where the groups stand.
//
// Thread-safety: runs on the calling thread and prints to std::cout or stderr.
#ifndef CLIENT_CLI_REBALANCE_H_
#define CLIENT_CLI_REBALANCE_H_

#include <string>

#include "client/bloom_client.h"

namespace bloomcli {

struct RebalanceArgs {
  std::string tolerance;    // a fraction of the mean (default 0.1)
  std::string max_moves;    // default 16
  std::string max_filters;  // per move, default 300,000
  bool dry_run = false;
};

// `client` talks to any pod of the deployment; `options` open the others. Returns the exit
// status.
int Rebalance(const bloomclient::BloomClient& client, const bloomclient::ClientOptions& options,
              const RebalanceArgs& args);

}  // namespace bloomcli

#endif  // CLIENT_CLI_REBALANCE_H_
