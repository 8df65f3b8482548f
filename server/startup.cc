#include "server/startup.h"

#include <cstdio>
#include <fstream>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/log.h"
#include "common/open_files.h"
#include "google/protobuf/stubs/logging.h"
#include "server/node.h"
#include "server/signals.h"
#include "service/tls.h"

namespace server {

absl::Status InContext(absl::string_view what_failed, const absl::Status& status) {
  return {status.code(), absl::StrCat(what_failed, status.ToString())};
}

void RouteProtobufLogs() {
  google::protobuf::SetLogHandler(
      [](google::protobuf::LogLevel level, const char* file, int line, const std::string& message) {
        if (absl::StrContains(file, "wire_format_lite")) return;
        const std::string text = absl::StrCat("protobuf: ", message, " (", file, ":", line, ")");
        if (level >= google::protobuf::LOGLEVEL_ERROR) {
          bloomlog::LogError(text);
        } else {
          bloomlog::LogWarning(text);
        }
      });
}

void LogHostLimits(const bloomsys::ContainerMemory& container) {
  bloomlog::LogInfo(
      absl::StrCat("container memory: ", container.bytes, " bytes, from ", container.source));
  if (absl::StatusOr<bloomsys::OpenFileLimit> files = bloomsys::RaiseOpenFileLimit(); files.ok()) {
    bloomlog::LogInfo(absl::StrCat("open-file limit: ", files->now,
                                   files->now != files->before
                                       ? absl::StrCat(" (raised from ", files->before, ")")
                                       : std::string(" (the hard limit)")));
  } else {
    bloomlog::LogWarning(absl::StrCat("open-file limit not raised: ", files.status().message()));
  }
}

absl::StatusOr<std::unique_ptr<service::TokenAuthenticator>> LoadTokens(
    const std::string& token_file) {
  if (token_file.empty()) return nullptr;
  absl::StatusOr<std::unique_ptr<service::TokenAuthenticator>> auth =
      service::TokenAuthenticator::Load(token_file);
  if (auth.ok() && (*auth)->size() == 0) {
    bloomlog::LogWarning(absl::StrCat("the token file ", token_file,
                                      " holds no tokens: every call but health is refused"));
  }
  return auth;
}

absl::Status WritePortFile(const std::string& port_file, int port, int metrics_port,
                           int health_port) {
  const std::string tmp = port_file + ".tmp";
  {
    std::ofstream out(tmp);
    out << port << "\n";
    if (metrics_port != 0) out << "metrics " << metrics_port << "\n";
    if (health_port != 0) out << "health " << health_port << "\n";
  }
  if (std::rename(tmp.c_str(), port_file.c_str()) != 0) {
    return absl::InternalError(absl::StrCat("cannot write --port_file ", port_file));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Failover>> JoinCluster(const ServerConfig& config) {
  if (config.replication.etcd_endpoints.empty()) return nullptr;
  absl::StatusOr<uint64_t> held = HeldSequence(config.store);
  if (!held.ok()) {
    return InContext("cannot open the store: ", held.status());
  }
  absl::StatusOr<std::unique_ptr<Failover>> started =
      Failover::Start(config.replication, config.store.min_replica_acks, *held, WakeMainLoop);
  if (!started.ok()) {
    return InContext("etcd: ", started.status());
  }
  bloomlog::LogInfo(absl::StrCat("cluster ", config.replication.cluster, " in etcd at ",
                                 absl::StrJoin(config.replication.etcd_endpoints, ","),
                                 ": this pod is ", config.replication.advertise_address,
                                 ", holding sequence ", *held));
  return started;
}

std::function<metrics::ServerMetrics::CertificateExpiries()> CertificateSource(
    const ServerConfig& config) {
  const std::vector<std::pair<std::string, std::string>> files = {
      {"server", config.server.tls.cert_file},
      {"client_ca", config.server.tls.client_ca_file},
      {"replication_client", config.replication.cert_file},
      {"replication_ca", config.replication.ca_file},
      {"etcd_client", config.replication.etcd_cert_file},
      {"etcd_ca", config.replication.etcd_ca_file}};
  return [files] {
    metrics::ServerMetrics::CertificateExpiries expiries;
    for (const auto& [name, path] : files) {
      if (path.empty()) continue;
      if (absl::StatusOr<absl::Time> expires = service::CertificateExpiry(path); expires.ok()) {
        expiries.emplace_back(name, *expires);
      }
    }
    return expiries;
  };
}

absl::StatusOr<std::unique_ptr<AckLog>> OpenAckLog(const ReplicationConfig& config) {
  if (config.ack_log.empty()) return nullptr;
  return AckLog::Open(config.ack_log, config.name.empty() ? config.advertise_address : config.name);
}

}  // namespace server
