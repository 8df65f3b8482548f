// A pod's view of its sharded deployment, kept from etcd (shard_map_watch.h).
#include "coordination/shard_map_watch.h"

#include <chrono>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "coordination/cluster_state.h"

namespace coordination {

ShardMapWatch::ShardMapWatch(EtcdClient* etcd, ShardMapWatchOptions options)
    : etcd_(etcd),
      options_(std::move(options)),
      current_(std::make_shared<const sharding::ShardState>()) {}

absl::StatusOr<std::unique_ptr<ShardMapWatch>> ShardMapWatch::Start(EtcdClient* etcd,
                                                                    ShardMapWatchOptions options) {
  if (options.map_key.empty()) return absl::InvalidArgumentError("no shard map key");
  if (absl::Status valid = sharding::ShardMap::CheckGroupName(options.own_group); !valid.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("this pod's group (--cluster) cannot be in a shard map: ", valid.message()));
  }
  std::unique_ptr<ShardMapWatch> watch(new ShardMapWatch(etcd, std::move(options)));
  ShardMapWatch* self = watch.get();
  bloomsync::BlockingLock lock(&watch->mu_);
  watch->threads_.emplace_back([self] {
    self->Follow(self->options_.map_key, /*prefix=*/false,
                 [self](const std::vector<KeyValue>& records) { self->ApplyMap(records); });
  });
  return watch;
}

ShardMapWatch::~ShardMapWatch() {
  std::vector<std::thread> threads;
  {
    bloomsync::BlockingLock lock(&mu_);
    stopping_ = true;
    for (EtcdWatch* watch : watches_) watch->Cancel();
    changed_.NotifyAll();
    threads.swap(threads_);
  }
  for (std::thread& thread : threads) thread.join();
}

std::shared_ptr<const sharding::ShardState> ShardMapWatch::Current() const {
  bloomsync::BlockingLock lock(&mu_);
  return current_;
}

bool ShardMapWatch::WaitForVersion(uint64_t version, absl::Time deadline) const {
  bloomsync::BlockingLock lock(&mu_);
  return changed_.WaitUntil(lock, absl::ToChronoTime(deadline),
                            [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
                              return map_.version() >= version || stopping_;
                            }) &&
         map_.version() >= version;
}

absl::Status ShardMapWatch::CatchUp(absl::Time deadline) const {
  absl::StatusOr<KeyValue> record = etcd_->Get(options_.map_key);
  if (absl::IsNotFound(record.status())) return absl::OkStatus();
  if (!record.ok()) return record.status();
  absl::StatusOr<sharding::ShardMap> map = sharding::ShardMap::Decode(record->value);
  if (!map.ok()) return map.status();
  if (!WaitForVersion(map->version(), deadline)) {
    return absl::DeadlineExceededError(
        absl::StrCat("the shard map view did not reach version ", map->version(), " in time"));
  }
  return absl::OkStatus();
}

bool ShardMapWatch::PauseBeforeRetry() {
  bloomsync::BlockingLock lock(&mu_);
  changed_.WaitFor(lock, absl::ToChronoMilliseconds(options_.retry),
                   [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return stopping_; });
  return !stopping_;
}

void ShardMapWatch::Follow(const std::string& key, bool prefix,
                           const std::function<void(const std::vector<KeyValue>&)>& apply) {
  auto read = [&](int64_t* revision) -> absl::StatusOr<std::vector<KeyValue>> {
    if (prefix) return etcd_->GetPrefix(key, revision);
    absl::StatusOr<KeyValue> value = etcd_->Get(key, revision);
    if (value.ok()) return std::vector<KeyValue>{*std::move(value)};
    if (absl::IsNotFound(value.status())) return std::vector<KeyValue>{};
    return value.status();
  };
  absl::Status last_error;
  while (true) {
    {
      bloomsync::BlockingLock lock(&mu_);
      if (stopping_) return;
    }
    int64_t revision = 0;
    absl::StatusOr<std::vector<KeyValue>> records = read(&revision);
    absl::StatusOr<std::unique_ptr<EtcdWatch>> watch =
        records.ok() ? etcd_->Watch(key, prefix, revision + 1) : records.status();
    if (!watch.ok()) {
      if (watch.status().ToString() != last_error.ToString()) {
        bloomlog::LogWarning(absl::StrCat("shard map: cannot read ", key,
                                          " (retrying): ", watch.status().ToString()));
        last_error = watch.status();
      }
      if (!PauseBeforeRetry()) return;
      continue;
    }
    last_error = absl::OkStatus();
    apply(*records);
    {
      bloomsync::BlockingLock lock(&mu_);
      if (stopping_) return;
      watches_.insert(watch->get());
    }
    // Each change etcd reports: read the key again, whole (changes are rare; a read of the
    // whole is simpler to get right than applying events one by one).
    while ((*watch)->Next().ok()) {
      absl::StatusOr<std::vector<KeyValue>> again = read(nullptr);
      if (!again.ok()) break;
      apply(*again);
    }
    {
      bloomsync::BlockingLock lock(&mu_);
      watches_.erase(watch->get());
    }
    if (!PauseBeforeRetry()) return;
  }
}

void ShardMapWatch::ApplyMap(const std::vector<KeyValue>& records) {
  if (records.empty()) return;  // no map yet (bloom-cli cluster init writes it)
  absl::StatusOr<sharding::ShardMap> map = sharding::ShardMap::Decode(records.front().value);
  bloomsync::BlockingLock lock(&mu_);
  if (!map.ok()) {
    bloomlog::LogError(absl::StrCat("shard map at ", options_.map_key,
                                    " cannot be read; keeping version ", map_.version(), ": ",
                                    map.status().ToString()));
    return;
  }
  if (map->version() <= map_.version()) {
    if (map->version() < map_.version()) {
      bloomlog::LogWarning(absl::StrCat("shard map at ", options_.map_key, " went back to version ",
                                        map->version(), "; keeping version ", map_.version()));
    }
    return;
  }
  map_ = *std::move(map);
  FollowGroups(map_);
  PublishLocked();
  bloomlog::LogInfo(absl::StrCat("shard map version ", map_.version(), ": ", map_.Encode()));
}

void ShardMapWatch::FollowGroups(const sharding::ShardMap& map) {
  if (stopping_) return;
  for (const std::string& group : map.groups()) {
    if (!followed_.insert(group).second) continue;
    threads_.emplace_back([this, group] {
      Follow(group + "/", /*prefix=*/true,
             [this, &group](const std::vector<KeyValue>& records) { ApplyGroup(group, records); });
    });
  }
}

void ShardMapWatch::ApplyGroup(const std::string& group, const std::vector<KeyValue>& records) {
  sharding::GroupAddresses addresses;
  const std::string leader_key = LeaderKey(group);
  const std::string members = MembersPrefix(group);
  for (const KeyValue& kv : records) {
    if (kv.key == leader_key) {
      if (absl::StatusOr<LeaderRecord> leader = DecodeLeader(kv.value); leader.ok()) {
        addresses.primary = leader->address;
      }
    } else if (absl::StartsWith(kv.key, members)) {
      if (absl::StatusOr<MemberRecord> member = DecodeMember(kv.value); member.ok()) {
        addresses.members.push_back(member->address);
      }
    }
  }
  bloomsync::BlockingLock lock(&mu_);
  groups_[group] = std::move(addresses);
  PublishLocked();
}

void ShardMapWatch::PublishLocked() {
  auto state = std::make_shared<sharding::ShardState>();
  state->map = map_;
  state->groups = groups_;
  // The pause figures carry over from state to state.
  const sharding::ShardState& before = *current_;
  const absl::Time now = absl::Now();
  const bool paused =
      map_.move().has_value() && map_.move()->phase == sharding::SlotMove::Phase::kPaused;
  const bool was_paused = before.paused_since != absl::InfiniteFuture();
  state->pauses_ended = before.pauses_ended;
  state->paused_total = before.paused_total;
  if (paused) {
    state->paused_since = was_paused ? before.paused_since : now;
  } else if (was_paused) {
    ++state->pauses_ended;
    state->paused_total += now - before.paused_since;
  }
  current_ = std::move(state);
  changed_.NotifyAll();
}

}  // namespace coordination
