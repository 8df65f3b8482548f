// How bloom-cli cluster move (cli_move.h) reaches a sharded deployment's pods: the shard map
// through any pod (the seed), each pod through a client of its own, a group's primary as the
// map names it (waiting out an election), and the waits of a move's steps: for every member of
// a group to hold a map version, for a group's followers to apply what its primary holds.
// Every call carries the mover's header (service/shard_router.h: the target of a move serves
// the moving slots to it, and a pod lists what it holds itself, copies included).
//
//   MovePods pods(seed, options);
//   absl::StatusOr<std::string> primary = pods.CachedPrimaryOf("feed/a");
//   absl::StatusOr<std::set<std::string>> held = pods.ListHeld(*primary, 0, 1023, 4096);
//
// Thread-safety: thread-safe (a move copies several filters at once through it).
#ifndef CLIENT_MOVE_PODS_H_
#define CLIENT_MOVE_PODS_H_

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "bloom/v1/bloom.pb.h"
#include "client/bloom_client.h"
#include "common/blocking_mutex.h"
#include "grpcpp/grpcpp.h"

namespace bloomcli {

// Whether a call that failed so may succeed once a primary is elected (a failover).
bool Transient(const absl::Status& status);

class MovePods {
 public:
  // How long a step waits for pods (to take a map version, to apply the copies) before
  // failing, and between attempts of a call that failed for want of a primary.
  static constexpr absl::Duration kWaitForPods = absl::Seconds(30);
  static constexpr absl::Duration kRetryPause = absl::Milliseconds(200);
  static constexpr int kAttempts = 50;  // 10 s of kRetryPause: longer than a failover

  // `seed` is any pod of the deployment, and must outlive this; `options` open the others.
  MovePods(const bloomclient::BloomClient& seed, bloomclient::ClientOptions options)
      : seed_(seed), options_(std::move(options)) {}

  // Sets a mover's call's deadline and headers (the caller's token, the mover's header).
  void Prepare(grpc::ClientContext& context) const;
  // The channel to the seed, for calls about the whole deployment (ChangeShardMap).
  std::shared_ptr<grpc::Channel> seed_channel() const { return seed_.channel(); }
  // The shard map, as the seed holds it.
  absl::StatusOr<bloom::v1::ShardMap> Map() const;
  // The client of the pod at `address` (made at the first call), which names that pod only.
  bloomclient::BloomClient& Pod(const std::string& address);
  // The primary of `group` now (waiting out an election).
  absl::StatusOr<std::string> PrimaryOf(const std::string& group) const;
  // The primary of `group` as last asked: a round of copies asks the map once per group. A
  // call to a primary that stepped down fails; ForgetPrimaries then makes the next ask again.
  absl::StatusOr<std::string> CachedPrimaryOf(const std::string& group);
  void ForgetPrimaries();
  // The filters of slots `first` to `last` (of `slot_count`) that the pod at `address` holds
  // itself, copies included.
  absl::StatusOr<std::set<std::string>> ListHeld(const std::string& address, uint32_t first,
                                                 uint32_t last, uint32_t slot_count);
  // Deletes `name` at `group`'s primary, retried across failovers (NOT_FOUND if it has none).
  absl::Status DeleteAt(const std::string& group, const std::string& name);
  // Waits until every member of `group` holds map version `version` or later.
  absl::Status WaitForVersion(const std::string& group, uint64_t version);
  // Waits until every follower of `group` has applied what its primary holds now.
  absl::Status WaitForFollowers(const std::string& group);

 private:
  const bloomclient::BloomClient& seed_;
  const bloomclient::ClientOptions options_;
  bloomsync::BlockingMutex mu_;
  std::map<std::string, std::unique_ptr<bloomclient::BloomClient>> pods_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::string> primaries_ ABSL_GUARDED_BY(mu_);  // CachedPrimaryOf's
};

}  // namespace bloomcli

#endif  // CLIENT_MOVE_PODS_H_
