// How a pod proves itself to etcd and checks that it talks to the real etcd: TLS with the CA
// that etcd's certificates chain to, a client certificate for an etcd run with
// --client-cert-auth, and a user of etcd's own auth (etcdctl user add, auth enable).
//
//   EtcdSecurity security;
//   security.ca_file = "/etc/etcd-tls/ca.crt";
//   security.cert_file = "/etc/etcd-tls/tls.crt";
//   security.key_file = "/etc/etcd-tls/tls.key";
//   ASSIGN_OR_RETURN(auto etcd, EtcdClient::Connect(endpoints, absl::Seconds(2), security));
//
// The certificate files are watched like the server's own (gRPC's file watcher re-reads them
// every reload_interval), so a rotated Secret is used for new connections without a restart.
//
// Thread-safety: plain values; the functions only read files.
#ifndef COORDINATION_ETCD_SECURITY_H_
#define COORDINATION_ETCD_SECURITY_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "grpcpp/security/credentials.h"

namespace coordination {

struct EtcdSecurity {
  // PEM CA bundle etcd's serving certificates are verified with; empty: plaintext.
  std::string ca_file;
  // PEM client certificate and its key, shown to an etcd that asks for one; both or neither,
  // and only with ca_file.
  std::string cert_file;
  std::string key_file;
  // A user of etcd's auth: each call carries a token etcd gave for this name and password.
  // Empty username: no auth (an etcd with client-cert-auth takes the user from the
  // certificate's common name instead).
  std::string username;
  std::string password;
  absl::Duration reload_interval = absl::Seconds(5);

  bool tls() const { return !ca_file.empty(); }
  bool authenticates() const { return !username.empty(); }
};

// The channel credentials `security` asks for: insecure without a CA, else TLS over gRPC's
// file watcher. INVALID_ARGUMENT for settings that cannot work together (a certificate
// without a key or without a CA, a password without a user); the files' contents are checked
// by the caller, who knows the flags' names.
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> EtcdChannelCredentials(
    const EtcdSecurity& security);

}  // namespace coordination

#endif  // COORDINATION_ETCD_SECURITY_H_
