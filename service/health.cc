#include "service/health.h"

#include <grpcpp/alarm.h>
#include <grpcpp/impl/codegen/proto_utils.h>
#include <grpcpp/impl/codegen/server_callback_handlers.h>
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/server_callback.h>

#include <atomic>
#include <chrono>
#include <string>

#include "absl/types/optional.h"
#include "grpc/health/v1/health.pb.h"

namespace service {
namespace {

using Response = grpc::health::v1::HealthCheckResponse;

constexpr char kCheck[] = "/grpc.health.v1.Health/Check";
constexpr char kWatch[] = "/grpc.health.v1.Health/Watch";

// The names this server reports on: itself ("") and its one service.
bool Known(const std::string& service) {
  return service.empty() || service == "bloom.v1.BloomFilterService";
}

grpc::ByteBuffer Encode(Response::ServingStatus status) {
  Response response;
  response.set_status(status);
  grpc::Slice slice(response.SerializeAsString());
  return {&slice, 1};
}

}  // namespace

class HealthService::Call final
    : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  explicit Call(HealthService* health, bool watch) : health_(health), watch_(watch) {
    // The alarm's callback runs once, fired or cancelled; it holds a reference till then.
    read_alarm_.Set(std::chrono::system_clock::now() + absl::ToChronoMilliseconds(kReadTimeout),
                    [this](bool fired) {
                      if (fired) {
                        FinishOnce(grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                                                "the HealthCheckRequest did not arrive in time"));
                      }
                      Unref();
                    });
    StartRead(&request_);
  }

  // Watch: the status now (AddWatcher) and after each change (SetServing); under the service's
  // lock, so before OnDone.
  void Notify(bool serving) {
    const Response::ServingStatus status = !known_   ? Response::SERVICE_UNKNOWN
                                           : serving ? Response::SERVING
                                                     : Response::NOT_SERVING;
    {
      bloomsync::MutexLock lock(&mu_);
      if (finished_) return;
      if (writing_) {
        pending_ = status;  // only the latest matters
        return;
      }
      writing_ = true;
      response_ = Encode(status);
    }
    StartWrite(&response_);
  }

  void OnReadDone(bool ok) override {
    read_alarm_.Cancel();
    if (!ok) {
      return FinishOnce(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                     "a health check carries one HealthCheckRequest"));
    }
    if (request_.Length() > kMaxRequestBytes) {
      return FinishOnce(grpc::Status(
          grpc::StatusCode::INVALID_ARGUMENT,
          "a HealthCheckRequest of more than " + std::to_string(kMaxRequestBytes) + " bytes"));
    }
    grpc::health::v1::HealthCheckRequest request;
    // gRPC's protobuf deserializer, which also empties request_ for the next read.
    if (!grpc::SerializationTraits<grpc::health::v1::HealthCheckRequest>::Deserialize(&request_,
                                                                                      &request)
             .ok()) {
      return FinishOnce(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                     "the request is not a HealthCheckRequest"));
    }
    known_ = Known(request.service());
    if (watch_) return health_->AddWatcher(this);
    if (!known_) {
      return FinishOnce(
          grpc::Status(grpc::StatusCode::NOT_FOUND, "unknown service '" + request.service() + "'"));
    }
    {
      bloomsync::MutexLock lock(&mu_);
      if (finished_) return;
      finished_ = true;
      response_ = Encode(health_->serving() ? Response::SERVING : Response::NOT_SERVING);
    }
    StartWriteAndFinish(&response_, grpc::WriteOptions(), grpc::Status::OK);
  }

  void OnWriteDone(bool ok) override {
    bool finish = false;
    bool write = false;
    {
      bloomsync::MutexLock lock(&mu_);
      writing_ = false;
      if (ok && pending_.has_value() && !finish_after_write_) {
        response_ = Encode(*pending_);
        pending_.reset();
        writing_ = write = true;
      } else if (finish_after_write_ || !ok) {
        finish = !finished_;
        finished_ = true;
      }
    }
    if (write) StartWrite(&response_);
    if (finish) Finish(grpc::Status::CANCELLED);
  }

  void OnCancel() override { FinishOnce(grpc::Status::CANCELLED); }

  void OnDone() override {
    read_alarm_.Cancel();
    health_->RemoveWatcher(this);
    Unref();
  }

 private:
  void Unref() {
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }

  // Finishes the call with `status` once no write is in flight. Whoever sets finished_ calls
  // Finish, and OnDone comes only after Finish: while finished_ is false the call is alive.
  void FinishOnce(const grpc::Status& status) {
    {
      bloomsync::MutexLock lock(&mu_);
      if (finished_) return;
      if (writing_) {
        finish_after_write_ = true;  // OnWriteDone finishes
        return;
      }
      finished_ = true;
    }
    Finish(status);
  }

  HealthService* const health_;
  const bool watch_;
  grpc::Alarm read_alarm_;
  std::atomic<int> refs_{2};  // OnDone's and the alarm callback's
  grpc::ByteBuffer request_;  // the one read writes here; then only OnReadDone reads it
  bool known_ = true;         // set by OnReadDone before the call is a watcher
  bloomsync::Mutex mu_;
  grpc::ByteBuffer response_ ABSL_GUARDED_BY(mu_);  // the write in flight's
  absl::optional<Response::ServingStatus> pending_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool finish_after_write_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
};

HealthService::HealthService() {
  // Streams on our side (gRPC reads nothing ahead for them), whatever the clients call them.
  int index = 0;
  for (const bool watch : {false, true}) {
    AddMethod(new grpc::internal::RpcServiceMethod(
        watch ? kWatch : kCheck, grpc::internal::RpcMethod::BIDI_STREAMING, nullptr));
    MarkMethodRawCallback(
        index++, new grpc::internal::CallbackBidiHandler<grpc::ByteBuffer, grpc::ByteBuffer>(
                     [this, watch](grpc::CallbackServerContext* context) {
                       context->AddInitialMetadata(kVersionHeader, BLOOM_VERSION);
                       return new Call(this, watch);
                     }));
  }
}

void HealthService::SetServing(bool serving) {
  bloomsync::MutexLock lock(&mu_);
  serving_ = serving;
  for (Call* watcher : watchers_) watcher->Notify(serving);
}

bool HealthService::serving() const {
  bloomsync::MutexLock lock(&mu_);
  return serving_;
}

void HealthService::AddWatcher(Call* call) {
  bloomsync::MutexLock lock(&mu_);
  watchers_.insert(call);
  call->Notify(serving_);
}

void HealthService::RemoveWatcher(Call* call) {
  bloomsync::MutexLock lock(&mu_);
  watchers_.erase(call);
}

}  // namespace service
