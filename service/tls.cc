#include "service/tls.h"

#include <grpcpp/security/tls_certificate_provider.h>
#include <grpcpp/security/tls_credentials_options.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <algorithm>
#include <ctime>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"

namespace service {
namespace {

absl::StatusOr<std::string> ReadFile(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read the ", what, " file ", path));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// OpenSSL's reason for the last failure (and clears its error queue).
std::string OpenSslError() {
  const auto code = ERR_get_error();  // unsigned long in OpenSSL's API
  ERR_clear_error();
  if (code == 0) return "no PEM data found";
  char buffer[256];
  ERR_error_string_n(code, buffer, sizeof(buffer));
  return buffer;
}

using BioPtr = std::unique_ptr<BIO, decltype(&BIO_free)>;
using X509Ptr = std::unique_ptr<X509, decltype(&X509_free)>;
using KeyPtr = std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)>;

BioPtr MemoryBio(const std::string& pem) {
  return {BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())), &BIO_free};
}

absl::StatusOr<X509Ptr> ParseCertificate(const std::string& pem, const std::string& path) {
  BioPtr bio = MemoryBio(pem);
  X509Ptr cert(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr), &X509_free);
  if (cert == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, " holds no PEM certificate: ", OpenSslError()));
  }
  return cert;
}

}  // namespace

absl::Status CheckTlsFiles(const TlsOptions& options) {
  if (options.cert_file.empty() || options.key_file.empty()) {
    return absl::InvalidArgumentError("TLS needs both a certificate file and a key file");
  }
  absl::StatusOr<std::string> cert_pem = ReadFile(options.cert_file, "TLS certificate");
  if (!cert_pem.ok()) return cert_pem.status();
  absl::StatusOr<std::string> key_pem = ReadFile(options.key_file, "TLS key");
  if (!key_pem.ok()) return key_pem.status();
  absl::StatusOr<X509Ptr> cert = ParseCertificate(*cert_pem, options.cert_file);
  if (!cert.ok()) return cert.status();
  BioPtr key_bio = MemoryBio(*key_pem);
  KeyPtr key(PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr), &EVP_PKEY_free);
  if (key == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(options.key_file, " holds no unencrypted PEM private key: ", OpenSslError()));
  }
  if (X509_check_private_key(cert->get(), key.get()) != 1) {
    ERR_clear_error();
    return absl::InvalidArgumentError(absl::StrCat("the key in ", options.key_file,
                                                   " does not belong to the certificate in ",
                                                   options.cert_file));
  }
  if (!options.client_ca_file.empty()) {
    absl::StatusOr<std::string> ca_pem = ReadFile(options.client_ca_file, "client CA");
    if (!ca_pem.ok()) return ca_pem.status();
    if (absl::StatusOr<X509Ptr> ca = ParseCertificate(*ca_pem, options.client_ca_file); !ca.ok()) {
      return ca.status();
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<absl::Time> CertificateExpiry(const std::string& path) {
  absl::StatusOr<std::string> pem = ReadFile(path, "certificate");
  if (!pem.ok()) return pem.status();
  absl::StatusOr<X509Ptr> cert = ParseCertificate(*pem, path);
  if (!cert.ok()) return cert.status();
  std::tm expiry{};
  if (ASN1_TIME_to_tm(X509_get0_notAfter(cert->get()), &expiry) != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": the certificate's expiry does not parse: ", OpenSslError()));
  }
  return absl::FromUnixSeconds(timegm(&expiry));
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeTlsServerCredentials(
    const TlsOptions& options) {
  if (absl::Status checked = CheckTlsFiles(options); !checked.ok()) return checked;
  const unsigned int interval = static_cast<unsigned int>(
      std::max<int64_t>(1, absl::ToInt64Seconds(options.reload_interval)));
  std::shared_ptr<grpc::experimental::CertificateProviderInterface> provider;
  if (options.client_ca_file.empty()) {
    provider = std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
        options.key_file, options.cert_file, interval);
  } else {
    provider = std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
        options.key_file, options.cert_file, options.client_ca_file, interval);
  }
  grpc::experimental::TlsServerCredentialsOptions tls(provider);
  tls.watch_identity_key_cert_pairs();
  if (options.client_ca_file.empty()) {
    tls.set_cert_request_type(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  } else {
    tls.watch_root_certs();
    tls.set_cert_request_type(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  }
  std::shared_ptr<grpc::ServerCredentials> credentials =
      grpc::experimental::TlsServerCredentials(tls);
  if (credentials == nullptr) return absl::InternalError("gRPC refused the TLS options");
  return credentials;
}

}  // namespace service
