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
// The certificate files are read again every reload_interval while calls are made; when they
// changed (a rotated Secret), the client's channels are made anew with them, so new
// connections use the new files without a restart and calls in flight finish on the old ones.
// (gRPC 1.51's own file watcher did not reach a client channel's later connections.)
//
// Thread-safety: plain values; the functions only read files.
#ifndef COORDINATION_ETCD_SECURITY_H_
#define COORDINATION_ETCD_SECURITY_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
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

// INVALID_ARGUMENT for settings that cannot work together: a certificate without a key or
// without a CA, a password without a user. The files' contents are checked by the caller, who
// knows the flags' names.
absl::Status CheckEtcdSecurity(const EtcdSecurity& security);

// The contents of the TLS files `security` names (empty strings for those it does not).
struct EtcdTlsFiles {
  std::string ca;
  std::string cert;
  std::string key;
  bool operator==(const EtcdTlsFiles& other) const {
    return ca == other.ca && cert == other.cert && key == other.key;
  }
};
// NOT_FOUND naming a file that does not read.
absl::StatusOr<EtcdTlsFiles> ReadEtcdTlsFiles(const EtcdSecurity& security);

// Channel credentials from `files`: TLS verifying etcd's certificate and host name with the CA,
// showing the client certificate if there is one; without a CA, plaintext.
std::shared_ptr<grpc::ChannelCredentials> EtcdChannelCredentials(const EtcdTlsFiles& files);

}  // namespace coordination

#endif  // COORDINATION_ETCD_SECURITY_H_
