// Token checks at the transport: a call without a valid token is refused as its headers arrive,
// before gRPC reads (and buffers) any of its messages.
//
// The handlers check the token's role per call (auth.h); that happens only once a unary call's
// whole request has been received, so a peer without a token could make the server buffer up
// to max_concurrent_streams x max_message_bytes per connection. The gate closes that: gRPC runs
// it from its server auth filter on each call's initial metadata, and a refusal cancels the
// stream (UNAUTHENTICATED) before its DATA frames are accepted.
//
//   auto gate = std::make_shared<TokenGate>(auth, on_refusal);
//   std::shared_ptr<grpc::ServerCredentials> creds =
//       GateCredentials(base_credentials_or_null_for_plaintext, gate);
//   ...  // serve; shut the server down
//   gate->Close();  // before what `auth` and `on_refusal` use goes away
//
// gRPC may still run the gate after its server is shut down and destroyed (an auth check
// queued on its executor thread: seen under AddressSanitizer in the shutdown stress test), so
// the credentials share the gate, and Close() makes every later check refuse without touching
// the authenticator or the callback.
//
// Health checking passes without a token by default (the kubelet's probes send none); server
// reflection can be opened too (grpcurl without -H). Every other method needs a token that the
// authenticator knows; roles are checked by the handlers, except for a slot mover's calls
// (the bloom-shard-move header, which lets a call reach a group's copies of slots moving to
// it), which only an admin token may make. OpenMethods says which stay open.
// Health reads its requests with a bound of its own (health.h); reflection, like every other
// method, receives a request whole before it can check its size (reflection.h), so it is
// closed by default.
//
// Thread-safety: TokenGate is thread-safe; the authenticator and the refusal callback must be
// thread-safe. Close() waits for the checks running.
#ifndef SERVICE_TOKEN_GATE_H_
#define SERVICE_TOKEN_GATE_H_

#include <grpcpp/security/server_credentials.h>

#include <functional>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/optional.h"
#include "common/mutex.h"
#include "service/auth.h"

namespace service {

// The methods that pass the gate without a token.
struct OpenMethods {
  bool health = true;       // grpc.health.v1.Health
  bool reflection = false;  // grpc.reflection.v1alpha and v1 ServerReflection
};

// "health,reflection" (either, both, in any order) or "" for none; INVALID_ARGUMENT naming
// anything else.
absl::StatusOr<OpenMethods> ParseOpenMethods(absl::string_view text);

class TokenGate {
 public:
  // Sees each refused call's status and path, for metrics and logs.
  using RefusalCallback = std::function<void(const absl::Status&, absl::string_view path)>;

  // `auth` must outlive the gate. `on_refusal` may be empty.
  TokenGate(const TokenAuthenticator* auth, RefusalCallback on_refusal, OpenMethods open = {})
      : auth_(auth), on_refusal_(std::move(on_refusal)), open_(open) {}

  // OK if a call to `path` ("/package.Service/Method") with this authorization metadata may
  // proceed to its handler; UNAUTHENTICATED otherwise, PERMISSION_DENIED for a slot mover's
  // call (`mover_call`: it carries the bloom-shard-move header) without an admin token, and
  // UNAVAILABLE once closed.
  absl::Status Check(absl::string_view path, absl::optional<absl::string_view> authorization,
                     bool mover_call = false) const;

  // From now on the gate uses neither `auth` nor `on_refusal`. Waits for the checks running.
  void Close();

 private:
  bool IsOpen(absl::string_view path) const;

  const TokenAuthenticator* const auth_;
  const RefusalCallback on_refusal_;
  const OpenMethods open_;
  mutable bloomsync::Mutex mu_;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
};

// Server credentials that run `gate` on every call: `base` (TLS credentials) with the gate as
// their auth metadata processor, or, when `base` is null, plaintext credentials with the gate.
// They keep the gate alive as long as gRPC keeps them.
std::shared_ptr<grpc::ServerCredentials> GateCredentials(
    std::shared_ptr<grpc::ServerCredentials> base, std::shared_ptr<const TokenGate> gate);

}  // namespace service

#endif  // SERVICE_TOKEN_GATE_H_
