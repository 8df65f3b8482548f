// EtcdWatch (etcd_watch.h): a watch stream over gRPC's callback API.
#include "coordination/etcd_watch.h"

#include <deque>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/blocking_mutex.h"

namespace coordination {

namespace pb = etcdserverpb;

KeyValue FromProto(const mvccpb::KeyValue& kv) {
  return KeyValue{kv.key(), kv.value(), kv.create_revision(), kv.mod_revision(), kv.lease()};
}

// The call's reactor. One read is always in flight while the stream lasts: gRPC's threads
// complete it into `incoming_`, queue the response and start the next, so etcd's answers wait
// in `responses_` for Next() (a watch of one key or prefix sees few). OnDone, the last
// reaction, records how the call ended. Start* calls are made without mu_ held: gRPC may run
// a reaction inline.
//
// Thread-safety: Take() and AwaitDone() are called from the watch's threads, the reactions from
// gRPC's; mu_ guards what they share.
class EtcdWatch::Stream final
    : public grpc::ClientBidiReactor<pb::WatchRequest, pb::WatchResponse> {
 public:
  void Start(pb::Watch::Stub& stub, grpc::ClientContext* context, const pb::WatchRequest& create) {
    create_ = create;
    stub.async()->Watch(context, this);
    StartWrite(&create_);
    StartRead(&incoming_);
    StartCall();
  }

  // The next response (true), or the call's status once it ended and every response was taken
  // (false).
  bool Take(pb::WatchResponse& response, grpc::Status& ended) {
    bloomsync::BlockingLock lock(&mu_);
    ready_.Wait(
        lock, [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !responses_.empty() || done_; });
    if (!responses_.empty()) {
      response = std::move(responses_.front());
      responses_.pop_front();
      return true;
    }
    ended = status_;
    return false;
  }

  // Returns once gRPC made its last reaction: the reactor may then be destroyed.
  void AwaitDone() {
    bloomsync::BlockingLock lock(&mu_);
    ready_.Wait(lock, [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return done_; });
  }

  void OnReadDone(bool ok) override {
    if (!ok) return;  // the stream is over: OnDone brings its status
    {
      bloomsync::BlockingLock lock(&mu_);
      responses_.push_back(std::move(incoming_));
      ready_.NotifyAll();
    }
    incoming_.Clear();
    StartRead(&incoming_);
  }

  void OnDone(const grpc::Status& status) override {
    bloomsync::BlockingLock lock(&mu_);
    status_ = status;
    done_ = true;
    ready_.NotifyAll();  // under mu_: the waiter may destroy this as soon as it holds mu_
  }

 private:
  pb::WatchRequest create_;     // the write in flight reads it
  pb::WatchResponse incoming_;  // the read in flight fills it (gRPC's threads only)
  bloomsync::BlockingMutex mu_;
  bloomsync::CondVar ready_;
  std::deque<pb::WatchResponse> responses_ ABSL_GUARDED_BY(mu_);
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status status_ ABSL_GUARDED_BY(mu_);
};

EtcdWatch::EtcdWatch() = default;

EtcdWatch::~EtcdWatch() {
  if (stream_ == nullptr) return;
  context_.TryCancel();
  stream_->AwaitDone();
}

void EtcdWatch::Cancel() { context_.TryCancel(); }

bool EtcdWatch::Start(pb::Watch::Stub& stub, const pb::WatchRequest& create,
                      pb::WatchResponse& created, grpc::Status& failure) {
  stream_ = std::make_unique<Stream>();
  stream_->Start(stub, &context_, create);
  return stream_->Take(created, failure);
}

absl::StatusOr<std::vector<WatchEvent>> EtcdWatch::Next() {
  pb::WatchResponse response;
  grpc::Status ended;
  while (stream_->Take(response, ended)) {
    if (response.canceled()) {
      if (response.compact_revision() != 0) {
        return absl::OutOfRangeError(absl::StrCat("etcd ", endpoint_, ": watched revision was ",
                                                  "compacted (now ", response.compact_revision(),
                                                  ")"));
      }
      return absl::UnavailableError(
          absl::StrCat("etcd ", endpoint_, " cancelled the watch: ", response.cancel_reason()));
    }
    if (response.events_size() == 0) continue;  // progress notifications
    std::vector<WatchEvent> events;
    events.reserve(response.events_size());
    for (const mvccpb::Event& event : response.events()) {
      WatchEvent out;
      out.type = event.type() == mvccpb::Event::DELETE ? WatchEvent::Type::kDelete
                                                       : WatchEvent::Type::kPut;
      out.kv = FromProto(event.kv());
      events.push_back(std::move(out));
    }
    return events;
  }
  if (ended.error_code() == grpc::StatusCode::CANCELLED) {
    return absl::CancelledError("the watch was cancelled");
  }
  return absl::UnavailableError(
      absl::StrCat("etcd ", endpoint_, " ended the watch: ", ended.error_message()));
}

}  // namespace coordination
