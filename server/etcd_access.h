// How a pod reaches etcd: the security flags (--etcd_ca_file, --etcd_cert_file,
// --etcd_key_file, --etcd_username, --etcd_password_file) read into the client's settings, and
// a check at start that etcd accepts them, whose errors name the flag to fix.
//
//   ASSIGN_OR_RETURN(std::unique_ptr<coordination::EtcdClient> etcd,
//                    ConnectToEtcd(config.replication, absl::Seconds(2)));
//
// Settings that can never work stop the pod (it exits naming the flag): a file that does not
// read or parse, a CA that etcd's certificate does not chain to, a password etcd refuses, a
// user not allowed to write the cluster's keys. What may be etcd being down (a refused or
// closed connection) is logged with what to check, and the pod waits for etcd as it always
// has: without etcd it is never primary.
//
// Thread-safety: functions, safe from any thread.
#ifndef SERVER_ETCD_ACCESS_H_
#define SERVER_ETCD_ACCESS_H_

#include <memory>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "coordination/etcd_client.h"
#include "coordination/etcd_security.h"
#include "server/server_flags.h"

namespace server {

// The files of `config`'s etcd flags read and checked: NOT_FOUND or INVALID_ARGUMENT naming
// the flag and the file.
absl::StatusOr<coordination::EtcdSecurity> EtcdSecurityFromConfig(const ReplicationConfig& config);

// A client of `config.etcd_endpoints` with `config`'s security, checked against etcd as above
// (FAILED_PRECONDITION naming the flag).
absl::StatusOr<std::unique_ptr<coordination::EtcdClient>> ConnectToEtcd(
    const ReplicationConfig& config, absl::Duration call_timeout);

}  // namespace server

#endif  // SERVER_ETCD_ACCESS_H_
