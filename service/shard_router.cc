// Where a call for a filter goes in a sharded deployment (shard_router.h).
#include "service/shard_router.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "bloom/v1/bloom.grpc.pb.h"
#include "common/slot.h"
#include "grpcpp/alarm.h"
#include "service/forwarder.h"

namespace service {

namespace {

grpc::Status Unavailable(const std::string& message) {
  return {grpc::StatusCode::UNAVAILABLE, message};
}

// The map version a forwarding pod held, if the call was forwarded here by one.
bool ForwardedHere(const grpc::ServerContextBase* caller, uint64_t* sender_version) {
  if (caller == nullptr) return false;
  const auto& metadata = caller->client_metadata();
  auto it = metadata.find(kShardHopHeader);
  if (it == metadata.end()) return false;
  if (!absl::SimpleAtoi(absl::string_view(it->second.data(), it->second.size()), sender_version)) {
    *sender_version = 0;
  }
  return true;
}

}  // namespace

ShardRouter::ShardRouter(const sharding::ShardView* view, StreamConnections::Connect connect,
                         absl::Duration read_retry_budget)
    : view_(view), connect_(std::move(connect)), read_retry_budget_(read_retry_budget) {}

ShardRouter::Decision ShardRouter::Decide(const rpcs::RpcInfo& info,
                                          absl::Span<const absl::string_view> names,
                                          const grpc::ServerContextBase* caller, bool fresh_read) {
  Decision decision;
  const std::shared_ptr<const sharding::ShardState> state = view_->Current();
  const sharding::ShardMap& map = state->map;
  decision.version = map.version();
  if (map.version() == 0) {
    decision.here = false;
    decision.refusal = Unavailable(
        "this pod has not read its deployment's shard map yet (is etcd reachable, and was "
        "`bloom-cli cluster init` run?): retry");
    return Refused(std::move(decision));
  }
  // The first name decides: the filter the call writes (Merge's target). The group that owns
  // it reads the others' filters it names from their groups (cross_group.cc).
  if (names.empty()) return decision;  // names no filter: served here
  const std::string* owner = &map.OwnerOfName(names.front());
  const std::string& own = view_->own_group();
  const uint32_t slot = slots::SlotOf(names.front(), map.slot_count());
  if (MoverCall(caller)) {
    // The mover's own calls (bloom-cli cluster move): the target takes copies of the slots
    // moving to it, and a group deletes the copies of slots it no longer owns.
    if (map.Moving(slot) && map.move()->to == own) return decision;
    if (info.rpc == rpcs::Rpc::kDelete && *owner != own && !map.Moving(slot)) return decision;
  }
  if (info.access == rpcs::Access::kWrite && map.WritesPaused(slot)) {
    decision.here = false;
    decision.refusal = Unavailable(absl::StrCat(
        "filter \"", names.front(), "\" (slot ", slot, ") is moving from group ", map.move()->from,
        " to ", map.move()->to, " (shard map version ", map.version(),
        "): writes to it pause until the move finishes, about a second; retry"));
    return Refused(std::move(decision));
  }
  if (*owner == own) return decision;  // served here
  decision.here = false;
  uint64_t sender_version = 0;
  // A call forwarded here by a pod holding an older map than this pod's goes on to the owner
  // this map names: each hop carries a newer version than the one before, so a call cannot
  // loop, and a pod whose map lags (its etcd watch cut off a moment) fails no call.
  if (ForwardedHere(caller, &sender_version) && map.version() <= sender_version) {
    decision.refusal = Unavailable(
        absl::StrCat("filter \"", names.front(), "\" (slot ", slot, ") belongs to group ", *owner,
                     " at shard map version ", map.version(), ", held by this pod of group ", own,
                     "; the pod that forwarded it here held version ", sender_version,
                     ": retry once the change has reached every pod"));
    return Refused(std::move(decision));
  }
  const bool read = info.access == rpcs::Access::kRead;
  decision = ToGroup(*state, *owner, !read || fresh_read);
  decision.read = read;
  return decision;
}

absl::Status ShardRouter::SettleWrite(absl::Span<const absl::string_view> names,
                                      const grpc::ServerContextBase* caller) const {
  if (names.empty() || (caller != nullptr && MoverCall(caller))) return absl::OkStatus();
  const std::shared_ptr<const sharding::ShardState> state = view_->Current();
  const sharding::ShardMap& map = state->map;
  for (const absl::string_view name : names) {
    const uint32_t slot = slots::SlotOf(name, map.slot_count());
    const std::string& owner = map.OwnerOfName(name);
    if (owner == view_->own_group() && !map.WritesPaused(slot)) {
      if (on_settled_) on_settled_(slot, map.version());
      continue;
    }
    return absl::UnavailableError(
        absl::StrCat("filter \"", name, "\" (slot ", slot, ") began moving from group ",
                     view_->own_group(), " while this write ran (shard map version ", map.version(),
                     "): it may or may not have been made; retry it"));
  }
  return absl::OkStatus();
}

bool ShardRouter::OwnedHere(absl::string_view name) const {
  const std::shared_ptr<const sharding::ShardState> state = view_->Current();
  return state->map.version() != 0 && state->map.OwnerOfName(name) == view_->own_group();
}

absl::Status ShardRouter::ExportFromOwner(
    absl::string_view name, grpc::ServerContextBase* caller,
    const std::function<absl::Status(absl::string_view)>& sink) {
  const std::shared_ptr<const sharding::ShardState> state = view_->Current();
  if (state->map.version() == 0) {
    return absl::UnavailableError("this pod has not read its deployment's shard map yet: retry");
  }
  const Decision route = ToGroup(*state, state->map.OwnerOfName(name), /*primary=*/true);
  if (!route.refusal.ok()) {
    return {static_cast<absl::StatusCode>(route.refusal.error_code()),
            route.refusal.error_message()};
  }
  std::shared_ptr<grpc::ClientContext> context =
      ForwardedCallContext(caller, /*stream=*/true, /*keep_hop=*/false);
  context->AddMetadata(kShardHopHeader, absl::StrCat(route.version));
  std::shared_ptr<Peer> peer = PeerAt(route);
  {
    bloomsync::BlockingLock lock(&mu_);
    in_flight_.emplace(context, false);
  }
  bloom::v1::ExportRequest request;
  request.set_name(static_cast<std::string>(name));
  std::unique_ptr<grpc::ClientReader<bloom::v1::ExportChunk>> reader =
      bloom::v1::BloomFilterService::NewStub(peer->channel)->Export(context.get(), request);
  bloom::v1::ExportChunk chunk;
  absl::Status sunk;
  while (sunk.ok() && reader->Read(&chunk)) sunk = sink(chunk.data());
  if (!sunk.ok()) context->TryCancel();
  const grpc::Status status = reader->Finish();
  {
    bloomsync::BlockingLock lock(&mu_);
    in_flight_.erase(context);
  }
  if (!sunk.ok()) return sunk.code() == kEnough ? absl::OkStatus() : sunk;
  if (status.ok()) return absl::OkStatus();
  return {static_cast<absl::StatusCode>(status.error_code()),
          absl::StrCat("reading filter \"", name, "\" from group ", route.group, ": ",
                       status.error_message())};
}

ShardRouter::Decision ShardRouter::ToGroup(const sharding::ShardState& state,
                                           const std::string& group, bool primary) {
  Decision decision;
  decision.here = false;
  decision.group = group;
  decision.version = state.map.version();
  const sharding::GroupAddresses* where = state.Find(group);
  if (where == nullptr || (where->primary.empty() && (primary || where->members.empty()))) {
    decision.refusal = Unavailable(absl::StrCat("group ", group, " has no ",
                                                primary ? "primary" : "member", " up now: retry"));
    return Refused(std::move(decision));
  }
  if (primary || where->members.empty()) {
    decision.address = where->primary;
  } else {
    decision.address = where->members[next_member_.fetch_add(1) % where->members.size()];
    decision.any_member = true;
  }
  return decision;
}

ShardRouter::Decision ShardRouter::Refused(Decision decision) {
  refused_.fetch_add(1, std::memory_order_relaxed);
  return decision;
}

bool ShardRouter::MoverCall(const grpc::ServerContextBase* caller) {
  return caller != nullptr && caller->client_metadata().count(kShardMoveHeader) != 0;
}

bool ShardRouter::ForwardedByAPod(const grpc::ServerContextBase* caller) {
  uint64_t sender_version = 0;
  return ForwardedHere(caller, &sender_version);
}

std::shared_ptr<ShardRouter::Peer> ShardRouter::PeerAt(const Decision& decision) {
  bloomsync::BlockingLock lock(&mu_);
  ++forwarded_[decision.group];
  const std::string& address = decision.address;
  std::shared_ptr<Peer>& peer = peers_[address];
  if (peer == nullptr) peer = std::make_shared<Peer>(connect_(address));
  return peer;
}

void ShardRouter::Forward(grpc::ServerContextBase* caller, const Decision& decision,
                          const char* method, const grpc::ByteBuffer& request,
                          grpc::ByteBuffer* response, std::function<void(grpc::Status)> done,
                          Answer answer) {
  if (!request.Valid()) {  // a call cancelled before its message (Forwarder::Unary says why)
    done(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "the call carried no request message"));
    return;
  }
  if (caller != nullptr && answer == Answer::kCall) {
    caller->AddInitialMetadata(kShardMapVersionHeader, absl::StrCat(decision.version));
  }
  Attempt attempt{caller, decision, method, &request, response, std::move(done)};
  attempt.cancellations = cancellations_.load();
  if (decision.any_member) attempt.tries = MembersAfterTheFirst(decision.group);
  if (decision.read) {
    attempt.retry_until = absl::Now() + read_retry_budget_;
    if (caller != nullptr) {
      attempt.retry_until = std::min(attempt.retry_until, absl::FromChrono(caller->deadline()));
    }
  }
  ForwardTo(std::move(attempt));
}

size_t ShardRouter::MembersAfterTheFirst(const std::string& group) const {
  const std::shared_ptr<const sharding::ShardState> state = view_->Current();
  const sharding::GroupAddresses* where = state->Find(group);
  return where == nullptr ? 0 : where->members.size();  // each other member, then the primary
}

void ShardRouter::ForwardTo(Attempt attempt) {
  std::shared_ptr<grpc::ClientContext> context =
      ForwardedCallContext(attempt.caller, /*stream=*/false, /*keep_hop=*/false);
  context->AddMetadata(kShardHopHeader, absl::StrCat(attempt.decision.version));
  std::shared_ptr<Peer> peer = PeerAt(attempt.decision);
  {
    bloomsync::BlockingLock lock(&mu_);
    in_flight_.emplace(context, false);
  }
  auto* const sent = new Attempt(std::move(attempt));  // the callback below takes it back
  peer->stub.UnaryCall(
      context.get(), sent->method, grpc::StubOptions(), sent->request, sent->response,
      [this, context, peer, sent](grpc::Status status) {
        std::unique_ptr<Attempt> attempt(sent);
        bool cut = false;
        {
          bloomsync::BlockingLock lock(&mu_);
          auto it = in_flight_.find(context);
          cut = it != in_flight_.end() && it->second;
          if (it != in_flight_.end()) in_flight_.erase(it);
        }
        const bool cancelled_since = cut || cancellations_.load() != attempt->cancellations;
        if (cut && status.error_code() == grpc::StatusCode::CANCELLED) {
          // Cut by CancelInFlight, not by its caller: the caller may retry it.
          status = Unavailable(
              "this pod stopped forwarding to the owning group (it is changing role or "
              "shutting down): retry the call");
        } else if (status.error_code() == grpc::StatusCode::UNAVAILABLE && cancelled_since &&
                   attempt->decision.read) {
          // A read refused after CancelInFlight is not sent again, as one waiting to be is not:
          // the same answer as theirs, with the owner's reason.
          status = Unavailable(absl::StrCat(
              "this pod stopped forwarding to the owning group (it is changing role or "
              "shutting down): retry the call (the group answered: ",
              status.error_message(), ")"));
        } else if (status.error_code() == grpc::StatusCode::UNAVAILABLE && !cancelled_since) {
          if (attempt->tries > 0) {
            // Another member of the group, the primary last.
            const std::shared_ptr<const sharding::ShardState> state = view_->Current();
            const Decision& tried = attempt->decision;
            Decision next = ToGroup(*state, tried.group, /*primary=*/attempt->tries == 1);
            if (next.refusal.ok() && next.address == tried.address && attempt->tries > 1) {
              next = ToGroup(*state, tried.group, /*primary=*/true);
            }
            if (next.refusal.ok() && next.address != tried.address) {
              next.version = tried.version;
              next.read = tried.read;
              attempt->decision = std::move(next);
              --attempt->tries;
              ForwardTo(std::move(*attempt));
              return;
            }
          }
          if (absl::Now() + attempt->wait < attempt->retry_until &&
              (attempt->caller == nullptr || !attempt->caller->IsCancelled())) {
            RetryLater(std::move(*attempt));
            return;
          }
        }
        attempt->done(std::move(status));
      });
}

void ShardRouter::RetryLater(Attempt attempt) {
  // 5 ms, then twice as long each time up to 100 ms: a map change reaches the owner's pods in
  // milliseconds, a new primary takes longer.
  attempt.wait = std::clamp(attempt.wait * 2, absl::Milliseconds(5), absl::Milliseconds(100));
  auto* alarm = new grpc::Alarm;
  auto* waiting = new Attempt(std::move(attempt));
  alarm->Set(std::chrono::system_clock::now() + absl::ToChronoMicroseconds(waiting->wait),
             [this, alarm, waiting](bool /*fired*/) {
               // Deleting the alarm in its own callback is safe: gRPC holds it until the
               // callback returns. Nothing cancels it, so it always fires.
               delete alarm;
               std::unique_ptr<Attempt> attempt(waiting);
               if (cancellations_.load() != attempt->cancellations) {
                 attempt->done(Unavailable(
                     "this pod stopped forwarding to the owning group (it is changing role or "
                     "shutting down): retry the call"));
                 return;
               }
               const std::shared_ptr<const sharding::ShardState> state = view_->Current();
               Decision next = ToGroup(*state, attempt->decision.group,
                                       /*primary=*/!attempt->decision.any_member);
               if (!next.refusal.ok()) {
                 attempt->done(next.refusal);
                 return;
               }
               next.version = attempt->decision.version;
               next.read = true;
               attempt->decision = std::move(next);
               attempt->tries =
                   attempt->decision.any_member ? MembersAfterTheFirst(attempt->decision.group) : 0;
               ForwardTo(std::move(*attempt));
             });
}

void ShardRouter::CancelInFlight() {
  cancellations_.fetch_add(1);  // the reads waiting to be sent again are answered, not sent
  std::vector<std::shared_ptr<grpc::ClientContext>> calls;
  {
    bloomsync::BlockingLock lock(&mu_);
    for (auto& [context, cut] : in_flight_) {
      cut = true;
      calls.push_back(context);
    }
  }
  // Outside the lock: a cancelled call's completion takes it.
  for (const std::shared_ptr<grpc::ClientContext>& context : calls) context->TryCancel();
}

void ShardRouter::ForwardMessage(grpc::ServerContextBase* caller, const Decision& decision,
                                 const char* method, const google::protobuf::Message& request,
                                 google::protobuf::Message* response,
                                 std::function<void(grpc::Status)> done, Answer answer) {
  struct Call {
    grpc::ByteBuffer request;
    grpc::ByteBuffer response;
  };
  auto call = std::make_shared<Call>();
  call->request = SerializeToBuffer(request);
  Forward(
      caller, decision, method, call->request, &call->response,
      [call, response, done = std::move(done)](grpc::Status status) {
        if (status.ok() && !ParseFromBuffer(call->response, response)) {
          status = grpc::Status(grpc::StatusCode::INTERNAL,
                                "the owning group's answer could not be read");
        }
        done(status);
      },
      answer);
}

metrics::ShardFigures ShardRouter::Figures() const {
  metrics::ShardFigures figures;
  const std::shared_ptr<const sharding::ShardState> state = view_->Current();
  figures.group = view_->own_group();
  figures.map_version = state->map.version();
  figures.groups = state->map.groups().size();
  figures.slots = state->map.slot_count();
  const std::vector<uint32_t> owned = state->map.SlotsPerGroup();
  for (size_t i = 0; i < owned.size(); ++i) {
    if (state->map.groups()[i] == view_->own_group()) figures.slots_owned = owned[i];
  }
  figures.refused = refused_.load(std::memory_order_relaxed);
  figures.moving = state->map.move().has_value();
  figures.writes_paused = state->paused_since != absl::InfiniteFuture();
  if (figures.writes_paused) {
    figures.paused_seconds = absl::ToDoubleSeconds(absl::Now() - state->paused_since);
  }
  figures.pauses_ended = state->pauses_ended;
  figures.paused_seconds_total = absl::ToDoubleSeconds(state->paused_total);
  figures.move_bytes_copied = move_bytes_copied_.load(std::memory_order_relaxed);
  figures.move_items_caught_up = move_items_caught_up_.load(std::memory_order_relaxed);
  bloomsync::BlockingLock lock(&mu_);
  figures.forwarded.assign(forwarded_.begin(), forwarded_.end());
  return figures;
}

bloom::v1::GetShardMapResponse ShardRouter::Describe() const {
  bloom::v1::GetShardMapResponse response;
  const std::shared_ptr<const sharding::ShardState> state = view_->Current();
  bloom::v1::ShardMap* map = response.mutable_map();
  map->set_version(state->map.version());
  map->set_slot_count(state->map.slot_count());
  for (const std::string& name : state->map.groups()) {
    bloom::v1::ShardGroup* group = map->add_groups();
    group->set_name(name);
    if (const sharding::GroupAddresses* where = state->Find(name)) {
      group->set_primary(where->primary);
      for (const std::string& member : where->members) group->add_members(member);
    }
  }
  if (const absl::optional<sharding::SlotMove>& moving = state->map.move()) {
    bloom::v1::SlotMove* move = map->mutable_move();
    move->set_first(moving->slots.first);
    move->set_last(moving->slots.last);
    move->set_from(moving->from);
    move->set_to(moving->to);
    move->set_paused(moving->phase == sharding::SlotMove::Phase::kPaused);
  }
  for (const sharding::OwnedRange& owned : state->map.Ranges()) {
    bloom::v1::SlotRange* range = map->add_ranges();
    range->set_first(owned.slots.first);
    range->set_last(owned.slots.last);
    range->set_group(owned.group);
  }
  return response;
}

}  // namespace service
