// ConnectToEtcd and the etcd security flags (etcd_access.h).
#include "server/etcd_access.h"

#include <fstream>
#include <sstream>
#include <string>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "coordination/cluster_state.h"
#include "service/tls.h"

namespace server {
namespace {

absl::Status Precondition(const std::string& message) {
  return absl::FailedPreconditionError(message);
}

// What etcd's answer to the start-up check means for this pod's settings: an error naming the
// flag if they can never work, OK otherwise (etcd answered, or may just be down).
absl::Status Diagnose(const absl::Status& status, const ReplicationConfig& config,
                      const std::string& key) {
  if (status.ok()) return status;
  const std::string message(status.message());
  if (absl::IsUnauthenticated(status)) {
    return Precondition(absl::StrCat(
        "etcd refused --etcd_username=", config.etcd_username,
        " with the password in --etcd_password_file=", config.etcd_password_file, ": ", message));
  }
  if (absl::IsPermissionDenied(status)) {
    const std::string user = config.etcd_username.empty()
                                 ? "this pod (with etcd's auth on and no --etcd_username, etcd "
                                   "takes the user from the client certificate's common name)"
                                 : absl::StrCat("--etcd_username=", config.etcd_username);
    return Precondition(absl::StrCat(user, " may not write ", key,
                                     " in etcd: grant its role readwrite on the prefix \"",
                                     config.cluster, "/\" (", message, ")"));
  }
  if (absl::StrContains(message, "user name is empty")) {
    return Precondition(absl::StrCat(
        "etcd has auth enabled: set --etcd_username and --etcd_password_file (", message, ")"));
  }
  if (absl::StrContains(message, "andshake failed")) {
    return Precondition(absl::StrCat(
        "TLS to etcd failed: check that --etcd_ca_file=", config.etcd_ca_file,
        " holds the CA that etcd's certificate chains to, and that the certificate names the "
        "host of --etcd_endpoints (",
        message, ")"));
  }
  // Refused, closed or silent connections: etcd may be down, so the pod waits for it, but the
  // settings may be what is wrong.
  if (absl::StrContains(message, "Socket closed") ||
      absl::StrContains(message, "Endpoint read failed")) {
    bloomlog::LogError(absl::StrCat(
        "etcd closed the connection: ",
        config.etcd_ca_file.empty()
            ? "if it serves TLS, set --etcd_ca_file"
            : "if it requires client certificates, set --etcd_cert_file and --etcd_key_file "
              "(signed by a CA it trusts); if it serves plaintext, drop --etcd_ca_file",
        " (", message, "); waiting for etcd"));
  } else {
    bloomlog::LogWarning(absl::StrCat("etcd does not answer yet (", message, "); waiting for it"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<coordination::EtcdSecurity> EtcdSecurityFromConfig(const ReplicationConfig& config) {
  coordination::EtcdSecurity security;
  security.ca_file = config.etcd_ca_file;
  security.cert_file = config.etcd_cert_file;
  security.key_file = config.etcd_key_file;
  security.username = config.etcd_username;
  if (!security.ca_file.empty()) {
    if (absl::Status ca = service::CertificateExpiry(security.ca_file).status(); !ca.ok()) {
      return absl::Status(ca.code(), absl::StrCat("--etcd_ca_file: ", ca.message()));
    }
  }
  if (!security.cert_file.empty()) {
    service::TlsOptions client;
    client.cert_file = security.cert_file;
    client.key_file = security.key_file;
    if (absl::Status checked = service::CheckTlsFiles(client); !checked.ok()) {
      return absl::Status(checked.code(),
                          absl::StrCat("--etcd_cert_file, --etcd_key_file: ", checked.message()));
    }
  }
  if (!config.etcd_password_file.empty()) {
    std::ifstream in(config.etcd_password_file);
    if (!in) {
      return absl::NotFoundError(
          absl::StrCat("--etcd_password_file: cannot read ", config.etcd_password_file));
    }
    std::stringstream text;
    text << in.rdbuf();
    // A Secret's file often ends in a newline that is no part of the password.
    security.password = std::string(absl::StripAsciiWhitespace(text.str()));
    if (security.password.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--etcd_password_file ", config.etcd_password_file, " is empty"));
    }
  }
  return security;
}

absl::StatusOr<std::unique_ptr<coordination::EtcdClient>> ConnectToEtcd(
    const ReplicationConfig& config, absl::Duration call_timeout) {
  absl::StatusOr<coordination::EtcdSecurity> security = EtcdSecurityFromConfig(config);
  if (!security.ok()) return security.status();
  absl::StatusOr<std::unique_ptr<coordination::EtcdClient>> etcd =
      coordination::EtcdClient::Connect(config.etcd_endpoints, call_timeout, *security);
  if (!etcd.ok()) return etcd.status();
  // The check writes nothing: a transaction whose condition never holds (no key is created at
  // revision -1), but etcd checks the user's permissions for its write all the same. Each
  // endpoint gets a turn (the client moves on after a transport failure) until one answers.
  const std::string key = coordination::LeaderKey(config.cluster);
  absl::Status checked;
  for (size_t attempt = 0; attempt < config.etcd_endpoints.size(); ++attempt) {
    absl::Status answer =
        (*etcd)
            ->Commit({{key, coordination::EtcdClient::Condition::Kind::kCreatedAt, -1, ""}},
                     {{key, "", 0, false}})
            .status();
    // A failed handshake says more than a member that is down: it is the one reported.
    if (checked.ok() || !absl::StrContains(checked.message(), "andshake failed")) {
      checked = answer;
    }
    if (answer.ok() || !(absl::IsUnavailable(answer) || absl::IsDeadlineExceeded(answer))) {
      checked = answer;
      break;
    }
  }
  if (absl::Status diagnosed = Diagnose(checked, config, key); !diagnosed.ok()) return diagnosed;
  return etcd;
}

}  // namespace server
