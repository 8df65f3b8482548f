// bloom-cli's commands for a sharded deployment (client/cli_cluster.h).
#include "client/cli_cluster.h"

#include <cstdio>
#include <iostream>
#include <map>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "bloom/replication/v1/replication.grpc.pb.h"
#include "bloom/v1/bloom.grpc.pb.h"
#include "client/cli_output.h"

namespace bloomcli {
namespace {

int UsageError(const std::string& problem) {
  std::fprintf(stderr, "bloom-cli: %s\n", problem.c_str());
  return 2;
}

int Shards(const bloomclient::BloomClient& client, bool json) {
  grpc::ClientContext context;
  client.PrepareContext(context);
  bloom::v1::GetShardMapResponse response;
  const absl::Status called = bloomclient::FromGrpcStatus(
      bloom::v1::BloomFilterService::NewStub(client.channel())
          ->GetShardMap(&context, bloom::v1::GetShardMapRequest(), &response));
  if (!called.ok()) return Error(called);
  if (json) {
    PrintJson(response);
    std::cout << "\n";
    return 0;
  }
  const bloom::v1::ShardMap& map = response.map();
  if (map.version() == 0) {
    std::cout << "not sharded (or no shard map yet): this pod's group holds every filter\n";
    return 0;
  }
  std::map<std::string, std::vector<std::string>> ranges;
  std::map<std::string, uint32_t> owned;
  for (const bloom::v1::SlotRange& range : map.ranges()) {
    ranges[range.group()].push_back(range.first() == range.last()
                                        ? absl::StrCat(range.first())
                                        : absl::StrCat(range.first(), "-", range.last()));
    owned[range.group()] += range.last() - range.first() + 1;
  }
  std::cout << "shard map version " << map.version() << ", " << map.slot_count() << " slots\n";
  for (const bloom::v1::ShardGroup& group : map.groups()) {
    std::cout << group.name() << ": " << owned[group.name()] << " slots ("
              << (ranges[group.name()].empty() ? std::string("none")
                                               : absl::StrJoin(ranges[group.name()], ","))
              << "), primary " << (group.primary().empty() ? "none" : group.primary())
              << ", members " << absl::StrJoin(group.members(), ",") << "\n";
  }
  return 0;
}

int Change(const bloomclient::BloomClient& client,
           const bloom::replication::v1::ChangeShardMapRequest& request, bool json) {
  namespace v1 = bloom::replication::v1;
  grpc::ClientContext context;
  client.PrepareContext(context);
  v1::ChangeShardMapResponse response;
  const absl::Status called =
      bloomclient::FromGrpcStatus(v1::ReplicationService::NewStub(client.channel())
                                      ->ChangeShardMap(&context, request, &response));
  if (!called.ok()) return Error(called);
  if (json) {
    PrintJson(response);
    std::cout << "\n";
  } else {
    std::cout << "shard map version " << response.version() << ": " << response.record() << "\n";
  }
  return 0;
}

}  // namespace

int Cluster(const bloomclient::BloomClient& client, const std::vector<std::string>& words,
            const std::string& slots, bool json) {
  if (words.empty()) return UsageError("cluster needs shards, init or add-group");
  const std::string& what = words[0];
  const std::vector<std::string> names(words.begin() + 1, words.end());
  if (what == "shards") return Shards(client, json);
  bloom::replication::v1::ChangeShardMapRequest request;
  if (what == "init") {
    if (names.empty()) return UsageError("cluster init needs at least one GROUP");
    for (const std::string& group : names) request.mutable_create()->add_groups(group);
    uint32_t count = 0;
    if (!slots.empty() && !absl::SimpleAtoi(slots, &count)) {
      return UsageError("--slots must be a number");
    }
    request.mutable_create()->set_slot_count(count);
    return Change(client, request, json);
  }
  if (what == "add-group") {
    if (names.size() != 1) return UsageError("cluster add-group needs one GROUP");
    request.set_add_group(names[0]);
    return Change(client, request, json);
  }
  return UsageError(absl::StrCat("unknown cluster command '", what, "'"));
}

}  // namespace bloomcli
