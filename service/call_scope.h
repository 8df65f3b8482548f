// CallScope: one call to BloomService in progress, from admission to its answer: counted for
// Drain(), checked that it may run (not draining, deadline not passed, token and role), and
// when done recorded in metrics and logged at debug level. And the two ways handlers that
// answer through a BloomService::Finish are finished: once the store acknowledges the write
// (AnswerOnceAcknowledged), or in process, waiting (WaitFor).
//
//   auto log = std::make_unique<CallScope>(this, rpcs::Rpc::kDelete, context, request.name());
//   if (absl::Status admitted = log->Admit(); !admitted.ok()) ...  // answer log->Done(admitted)
//
// Thread-safety: a CallScope belongs to one call (one thread at a time); the functions are
// thread-safe.
#ifndef SERVICE_CALL_SCOPE_H_
#define SERVICE_CALL_SCOPE_H_

#include <cstddef>
#include <future>
#include <memory>
#include <string>
#include <utility>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/rpcs.h"
#include "grpcpp/grpcpp.h"
#include "service/auth.h"
#include "service/bloom_service.h"
#include "storage/filter_store.h"

namespace service {

class CallScope {
 public:
  CallScope(BloomService* service, rpcs::Rpc rpc, grpc::ServerContextBase* context,
            absl::string_view name, size_t items = 0)
      : service_(service),
        rpc_(rpc),
        context_(context),
        name_(name),
        items_(items),
        start_(absl::Now()) {
    // Count first, then check: Drain() sets draining_ and then waits for the count, so a call
    // either sees draining_ or is waited for.
    service_->in_flight_.fetch_add(1);
  }
  ~CallScope() { service_->in_flight_.fetch_sub(1); }
  CallScope(const CallScope&) = delete;
  CallScope& operator=(const CallScope&) = delete;

  // OK if the call may run.
  absl::Status Admit();

  // After Admit() succeeded with token auth: the token's role and label.
  [[nodiscard]] const Caller& AdmittedCaller() const { return caller_; }

  [[nodiscard]] grpc::Status Done(const absl::Status& status) const;

 private:
  // At most one line per second, so a client retrying with a bad token cannot flood the log.
  // The token itself is never logged.
  BloomService* const service_;
  const rpcs::Rpc rpc_;
  grpc::ServerContextBase* const context_;
  std::string name_;
  size_t items_;
  absl::Time start_;
  Caller caller_;  // who the token says the caller is (default: no token needed)
};

// Runs `start` with a Finish and waits for it to be called: the in-process forms of the
// handlers that answer through one (tests and fuzzers).
template <typename Start>
grpc::Status WaitFor(Start start) {
  std::promise<grpc::Status> finished;
  std::future<grpc::Status> status = finished.get_future();
  start([&finished](grpc::Status done) { finished.set_value(std::move(done)); });
  return status.get();
}

// Answers a write made without waiting to be acknowledged (filter_store.h: defer_ack, or
// defer_sync with `durable`) through `finish` once the store acknowledges it: at once without
// --min_replica_acks, the fence (or, `durable`, --sync), else from the thread that hears the
// followers (or the WAL syncer's). `answer` runs first if it is acknowledged; a refused write
// is answered at once. `log` counts the call as in flight until then. No thread waits
// meanwhile: a stalled follower or a slow disk cannot tie up the gRPC threads.
void AnswerOnceAcknowledged(storage::FilterStore* store, std::unique_ptr<CallScope> log,
                            const absl::Status& written, absl::AnyInvocable<void() &&> answer,
                            BloomService::Finish finish, bool durable = false);

}  // namespace service

#endif  // SERVICE_CALL_SCOPE_H_
