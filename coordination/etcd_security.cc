// EtcdChannelCredentials and the TLS files behind them (etcd_security.h).
#include "coordination/etcd_security.h"

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"

namespace coordination {
namespace {

absl::StatusOr<std::string> ReadWhole(const std::string& path) {
  if (path.empty()) return std::string();
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::ostringstream text;
  text << in.rdbuf();
  // Empty (a Secret not yet filled): never a reason to fall back to plaintext.
  if (text.str().empty()) return absl::InvalidArgumentError(absl::StrCat(path, " is empty"));
  return text.str();
}

}  // namespace

absl::Status CheckEtcdSecurity(const EtcdSecurity& security) {
  if (security.cert_file.empty() != security.key_file.empty()) {
    return absl::InvalidArgumentError(
        "an etcd client certificate needs its key, and a key its certificate");
  }
  if (!security.cert_file.empty() && !security.tls()) {
    return absl::InvalidArgumentError(
        "an etcd client certificate is for TLS: it needs the CA that etcd's certificate "
        "chains to");
  }
  if (!security.password.empty() && !security.authenticates()) {
    return absl::InvalidArgumentError("an etcd password needs its user name");
  }
  return absl::OkStatus();
}

absl::StatusOr<EtcdTlsFiles> ReadEtcdTlsFiles(const EtcdSecurity& security) {
  EtcdTlsFiles files;
  for (auto [path, contents] :
       {std::pair{&security.ca_file, &files.ca}, std::pair{&security.cert_file, &files.cert},
        std::pair{&security.key_file, &files.key}}) {
    absl::StatusOr<std::string> read = ReadWhole(*path);
    if (!read.ok()) return read.status();
    *contents = *std::move(read);
  }
  return files;
}

std::shared_ptr<grpc::ChannelCredentials> EtcdChannelCredentials(const EtcdTlsFiles& files) {
  if (files.ca.empty()) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = files.ca;
  ssl.pem_cert_chain = files.cert;
  ssl.pem_private_key = files.key;
  return grpc::SslCredentials(ssl);  // verifies etcd's certificate and host name, as etcdctl
}

}  // namespace coordination
