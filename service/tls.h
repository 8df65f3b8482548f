// TLS for the gRPC server: certificate and key files, optionally a CA that client certificates
// must chain to (mutual TLS). gRPC's file watcher re-reads the files every reload interval, so
// rotated certificates (cert-manager, a renewed Kubernetes Secret) take effect without a
// restart and without dropping connections.
//
// Thread-safety: the functions are thread-safe (they only read files).
#ifndef SERVICE_TLS_H_
#define SERVICE_TLS_H_

#include <grpcpp/security/server_credentials.h>

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace service {

struct TlsOptions {
  std::string cert_file;       // PEM certificate chain, server's first
  std::string key_file;        // PEM private key of that certificate
  std::string client_ca_file;  // PEM CA bundle; if set, clients must present a certificate
                               // signed by it (mutual TLS)
  absl::Duration reload_interval = absl::Seconds(5);

  bool enabled() const { return !cert_file.empty() || !key_file.empty(); }
};

// Reads and checks the files: PEM that parses, and a key that matches the certificate.
// INVALID_ARGUMENT naming the file and the problem; NOT_FOUND if one is missing.
absl::Status CheckTlsFiles(const TlsOptions& options);

// When the first certificate in the PEM file at `path` expires (its notAfter), read now: a
// rotated file's new certificate counts from its next read. For metrics
// (bloom_tls_certificate_expiry_timestamp_seconds).
absl::StatusOr<absl::Time> CertificateExpiry(const std::string& path);

// CheckTlsFiles, then credentials that watch the files for changes.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeTlsServerCredentials(
    const TlsOptions& options);

}  // namespace service

#endif  // SERVICE_TLS_H_
