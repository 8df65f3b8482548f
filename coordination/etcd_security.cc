// EtcdChannelCredentials (etcd_security.h).
#include "coordination/etcd_security.h"

#include <algorithm>

#include "grpcpp/security/tls_certificate_provider.h"
#include "grpcpp/security/tls_credentials_options.h"

namespace coordination {

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> EtcdChannelCredentials(
    const EtcdSecurity& security) {
  if (security.cert_file.empty() != security.key_file.empty()) {
    return absl::InvalidArgumentError(
        "an etcd client certificate needs its key, and a key its "
        "certificate");
  }
  if (!security.cert_file.empty() && !security.tls()) {
    return absl::InvalidArgumentError(
        "an etcd client certificate is for TLS: it needs the CA that etcd's certificate "
        "chains to");
  }
  if (!security.password.empty() && !security.authenticates()) {
    return absl::InvalidArgumentError("an etcd password needs its user name");
  }
  if (!security.tls()) return grpc::InsecureChannelCredentials();
  const auto interval = static_cast<unsigned int>(
      std::max<int64_t>(1, absl::ToInt64Seconds(security.reload_interval)));
  std::shared_ptr<grpc::experimental::CertificateProviderInterface> provider;
  grpc::experimental::TlsChannelCredentialsOptions options;
  if (security.cert_file.empty()) {
    provider = std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
        security.ca_file, interval);
  } else {
    provider = std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
        security.key_file, security.cert_file, security.ca_file, interval);
    options.watch_identity_key_cert_pairs();
  }
  options.set_certificate_provider(provider);
  options.watch_root_certs();
  // The server's certificate is verified against the CA and the endpoint's host name (gRPC's
  // default), as etcdctl does.
  std::shared_ptr<grpc::ChannelCredentials> credentials =
      grpc::experimental::TlsCredentials(options);
  if (credentials == nullptr) return absl::InternalError("gRPC refused the etcd TLS options");
  return credentials;
}

}  // namespace coordination
