// CallScope and the ways calls are finished (service/call_scope.h).
#include "service/call_scope.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/types/optional.h"
#include "common/log.h"
#include "service/convert.h"

namespace service {

absl::Status CallScope::Admit() {
  if (service_->draining_.load()) {
    return absl::UnavailableError("the server is shutting down; retry another replica");
  }
  if (context_ != nullptr && context_->deadline() < std::chrono::system_clock::now()) {
    return absl::DeadlineExceededError("the call's deadline passed before it was handled");
  }
  if (service_->hooks_.auth == nullptr) {
    caller_.role = Role::kAdmin;  // without token auth every caller may do anything
    return absl::OkStatus();
  }
  absl::optional<absl::string_view> authorization;
  if (context_ != nullptr) {
    const auto& metadata = context_->client_metadata();
    if (auto it = metadata.find("authorization"); it != metadata.end()) {
      authorization = absl::string_view(it->second.data(), it->second.size());
    }
  }
  absl::StatusOr<Caller> caller =
      service_->hooks_.auth->Authorize(authorization, RoleFor(rpc_), rpcs::Info(rpc_).label);
  if (caller.ok()) {
    caller_ = *std::move(caller);
    return absl::OkStatus();
  }
  service_->RecordAuthRefusal(caller.status(), rpcs::Info(rpc_).label,
                              context_ ? context_->peer() : "in-process");
  return caller.status();
}

grpc::Status CallScope::Done(const absl::Status& status) const {
  const absl::Duration took = absl::Now() - start_;
  if (service_->hooks_.metrics != nullptr) {
    service_->hooks_.metrics->RecordRpc(rpc_, status.code(), took, items_);
  }
  if (bloomlog::Enabled(bloomlog::Level::kDebug)) {
    bloomlog::LogDebug(absl::StrCat(
        "rpc ", rpcs::Info(rpc_).label, " name=", name_, " items=", items_,
        caller_.label.empty() ? "" : absl::StrCat(" caller=", caller_.label),
        " code=", absl::StatusCodeToString(status.code()), " took=", absl::FormatDuration(took)));
  }
  return ToGrpcStatus(status);
}

void AnswerOnceAcknowledged(storage::FilterStore* store, std::unique_ptr<CallScope> log,
                            const absl::Status& written, absl::AnyInvocable<void() &&> answer,
                            BloomService::Finish finish, bool durable) {
  if (!written.ok()) {
    std::move(finish)(log->Done(written));
    return;
  }
  auto acknowledged = [log = std::move(log), answer = std::move(answer),
                       finish = std::move(finish)](const absl::Status& status) mutable {
    if (status.ok()) std::move(answer)();
    std::move(finish)(log->Done(status));
  };
  if (durable) {
    store->WhenDurable(std::move(acknowledged));
  } else {
    store->WhenReplicated(std::move(acknowledged));
  }
}

}  // namespace service
