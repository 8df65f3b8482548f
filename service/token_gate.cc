#include "service/token_gate.h"

#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/slice.h>
#include <grpcpp/security/auth_metadata_processor.h>

#include <string>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/rpcs.h"
#include "service/shard_router.h"

namespace service {
namespace {

absl::string_view View(const grpc_slice& slice) {
  return {reinterpret_cast<const char*>(GRPC_SLICE_START_PTR(slice)), GRPC_SLICE_LENGTH(slice)};
}

// For TLS credentials, which accept a C++ processor.
class GateProcessor final : public grpc::AuthMetadataProcessor {
 public:
  explicit GateProcessor(std::shared_ptr<const TokenGate> gate) : gate_(std::move(gate)) {}

  // The check is a hash and a table scan: run it inline on the transport's thread.
  [[nodiscard]] bool IsBlocking() const override { return false; }

  grpc::Status Process(const InputMetadata& metadata, grpc::AuthContext* /*context*/,
                       OutputMetadata* /*consumed*/, OutputMetadata* /*response*/) override {
    absl::string_view path;
    absl::optional<absl::string_view> authorization;
    bool mover_call = false;
    for (const auto& [key, value] : metadata) {
      const absl::string_view k(key.data(), key.size());
      if (k == ":path") path = absl::string_view(value.data(), value.size());
      if (k == "authorization") authorization = absl::string_view(value.data(), value.size());
      if (k == kShardMoveHeader) mover_call = true;
    }
    const absl::Status status = gate_->Check(path, authorization, mover_call);
    if (status.ok()) return grpc::Status::OK;
    const absl::string_view message = status.message();
    return {static_cast<grpc::StatusCode>(status.code()), {message.data(), message.size()}};
  }

 private:
  const std::shared_ptr<const TokenGate> gate_;
};

// Plaintext credentials with the gate. gRPC 1.51's InsecureServerCredentials() refuses an auth
// metadata processor, but its core plaintext credentials take one (and then run the server auth
// filter), so wrap those.
class GatedPlaintextCredentials final : public grpc::ServerCredentials {
 public:
  explicit GatedPlaintextCredentials(std::shared_ptr<const TokenGate> gate)
      : credentials_(grpc_insecure_server_credentials_create()) {
    grpc_auth_metadata_processor processor{};
    processor.process = &GatedPlaintextCredentials::Process;
    // gRPC's credentials own the state and destroy it with themselves.
    processor.state = new std::shared_ptr<const TokenGate>(std::move(gate));
    processor.destroy = [](void* state) {
      delete static_cast<std::shared_ptr<const TokenGate>*>(state);
    };
    grpc_server_credentials_set_auth_metadata_processor(credentials_, processor);
  }
  ~GatedPlaintextCredentials() override { grpc_server_credentials_release(credentials_); }
  GatedPlaintextCredentials(const GatedPlaintextCredentials&) = delete;
  GatedPlaintextCredentials& operator=(const GatedPlaintextCredentials&) = delete;

  void SetAuthMetadataProcessor(
      const std::shared_ptr<grpc::AuthMetadataProcessor>& /*processor*/) override {
    // The gate is the processor; nothing else in this program sets one.
  }

 private:
  int AddPortToServer(const std::string& addr, grpc_server* server) override {
    return grpc_server_add_http2_port(server, addr.c_str(), credentials_);
  }

  static void Process(void* state, grpc_auth_context* /*context*/, const grpc_metadata* metadata,
                      size_t count, grpc_process_auth_metadata_done_cb done, void* user_data) {
    absl::string_view path;
    absl::optional<absl::string_view> authorization;
    bool mover_call = false;
    for (size_t i = 0; i < count; ++i) {
      const absl::string_view key = View(metadata[i].key);
      if (key == ":path") path = View(metadata[i].value);
      if (key == "authorization") authorization = View(metadata[i].value);
      if (key == kShardMoveHeader) mover_call = true;
    }
    const absl::Status status = (*static_cast<std::shared_ptr<const TokenGate>*>(state))
                                    ->Check(path, authorization, mover_call);
    if (status.ok()) {
      done(user_data, nullptr, 0, nullptr, 0, GRPC_STATUS_OK, nullptr);
      return;
    }
    const std::string message(status.message());
    done(user_data, nullptr, 0, nullptr, 0, static_cast<grpc_status_code>(status.code()),
         message.c_str());
  }

  grpc_server_credentials* const credentials_;
};

}  // namespace

absl::StatusOr<OpenMethods> ParseOpenMethods(absl::string_view text) {
  OpenMethods open{false, false};
  for (absl::string_view name : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    name = absl::StripAsciiWhitespace(name);
    if (name == "health") {
      open.health = true;
    } else if (name == "reflection") {
      open.reflection = true;
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "unknown open method '", name, "': list health, reflection, both or neither"));
    }
  }
  return open;
}

// Kubernetes probes and grpcurl-style tools speak neither TLS client certificates nor tokens:
// the RPC table says which methods they call.
bool TokenGate::IsOpen(absl::string_view path) const {
  const rpcs::RpcInfo* rpc = rpcs::FindByPath(path);
  if (rpc == nullptr) return false;
  switch (rpc->tokenless) {
    case rpcs::Tokenless::kIfHealthOpen:
      return open_.health;
    case rpcs::Tokenless::kIfReflectionOpen:
      return open_.reflection;
    case rpcs::Tokenless::kNever:
      return false;
  }
  return false;
}

absl::Status TokenGate::Check(absl::string_view path,
                              absl::optional<absl::string_view> authorization,
                              bool mover_call) const {
  if (IsOpen(path) && !mover_call) return absl::OkStatus();
  bloomsync::ReaderMutexLock lock(&mu_);
  if (closed_) return absl::UnavailableError("the server is shutting down");
  // Any valid token passes here; its role is checked by the handler, which knows the method.
  absl::StatusOr<Caller> caller = auth_->Authenticate(authorization);
  if (caller.ok() && mover_call) {
    // Such a call may write a group's copy of a slot moving to it, which the move then
    // replaces: from anyone but the mover, an add that could be lost.
    absl::Status admin =
        RequireRole(*caller, Role::kAdmin, "a slot mover's call (bloom-shard-move)");
    if (!admin.ok()) {
      if (on_refusal_) on_refusal_(admin, path);
      return admin;
    }
  }
  if (caller.ok()) return absl::OkStatus();
  if (on_refusal_) on_refusal_(caller.status(), path);
  return caller.status();
}

void TokenGate::Close() {
  bloomsync::MutexLock lock(&mu_);
  closed_ = true;
}

std::shared_ptr<grpc::ServerCredentials> GateCredentials(
    std::shared_ptr<grpc::ServerCredentials> base, std::shared_ptr<const TokenGate> gate) {
  if (base == nullptr) return std::make_shared<GatedPlaintextCredentials>(std::move(gate));
  base->SetAuthMetadataProcessor(std::make_shared<GateProcessor>(std::move(gate)));
  return base;
}

}  // namespace service
