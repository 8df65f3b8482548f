// What bloom-server does once, before its first incarnation (main.cc): protobuf's log lines
// routed to ours, the host's limits logged, the token file loaded, certificates watched for
// the expiry metric, the cluster joined through etcd, the ack log opened; and the port file
// written once the first incarnation serves.
//
//   RouteProtobufLogs();
//   ASSIGN_OR_RETURN(auto auth, LoadTokens(config.auth_token_file));
//   ASSIGN_OR_RETURN(auto failover, JoinCluster(config));  // null without --etcd_endpoints
//
// Thread-safety: functions for main()'s thread; CertificateSource's function may be called
// from any thread.
#ifndef SERVER_STARTUP_H_
#define SERVER_STARTUP_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/container_memory.h"
#include "metrics/metrics.h"
#include "server/ack_log.h"
#include "server/failover.h"
#include "server/server_flags.h"
#include "service/auth.h"

namespace server {

// libprotobuf logs an ERROR line for every request whose string fields are not UTF-8, which the
// server serves anyway (protos/wire/items_as_bytes.h): a client could fill the log with them.
// Parse complaints are dropped; anything else goes to the server's log.
void RouteProtobufLogs();

// Logs the container's memory and raises the open-file limit to its hard limit.
void LogHostLimits(const bloomsys::ContainerMemory& container);

// The token file's authenticator, or null without one.
absl::StatusOr<std::unique_ptr<service::TokenAuthenticator>> LoadTokens(
    const std::string& token_file);

// The certificates of --tls_cert_file, --tls_client_ca_file, --replication_cert_file,
// --replication_ca_file, --etcd_cert_file and --etcd_ca_file, read at each scrape for their
// expiry (a file that does not read is left out: the server's own checks say why).
std::function<metrics::ServerMetrics::CertificateExpiries()> CertificateSource(
    const ServerConfig& config);

// With --etcd_endpoints, joins the cluster holding what the data dir holds; null without.
absl::StatusOr<std::unique_ptr<Failover>> JoinCluster(const ServerConfig& config);

// The ack log of --ack_log; null without.
absl::StatusOr<std::unique_ptr<AckLog>> OpenAckLog(const ReplicationConfig& config);

// Writes --port_file (the port, then the metrics and health ports when they listen), and
// renames it into place, so a reader never sees a half-written file.
absl::Status WritePortFile(const std::string& port_file, int port, int metrics_port,
                           int health_port);

// `status` (its code, its text) with what failed said first, for the line main() fails with.
absl::Status InContext(absl::string_view what_failed, const absl::Status& status);

}  // namespace server

#endif  // SERVER_STARTUP_H_
