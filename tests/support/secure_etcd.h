// A real etcd locked down as production should run it: TLS on its client URL, client
// certificates required (--client-cert-auth), and etcd's auth on with a root user and a user
// "bloom" whose role may read and write only the keys under one prefix.
//
//   TestPki pki;
//   std::unique_ptr<SecureEtcd> etcd = SecureEtcd::Start(pki, "c1/");
//   ... bloom-server etcd->PodFlags() ...
//   etcd->Etcdctl("get --prefix c1/");  // as root
//
// Certificates come from TestPki's first CA (ca1.crt; client1.{crt,key} for clients).
//
// Thread-safety: not thread-safe; owned by one test.
#ifndef TESTS_SUPPORT_SECURE_ETCD_H_
#define TESTS_SUPPORT_SECURE_ETCD_H_

#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/support/etcd_process.h"
#include "tests/support/test_pki.h"
#include "tests/support/testing.h"

namespace bloomtest {

class SecureEtcd {
 public:
  static constexpr char kUser[] = "bloom";
  static constexpr char kPassword[] = "bloom-password";
  static constexpr char kRootPassword[] = "root-password";

  // Starts etcd and sets up its users; nullptr, with a test failure, if either fails.
  // `extra_flags` go to etcd as they are.
  static std::unique_ptr<SecureEtcd> Start(const TestPki& pki, const std::string& prefix,
                                           std::vector<std::string> extra_flags = {}) {
    auto etcd = std::unique_ptr<SecureEtcd>(new SecureEtcd(pki));
    etcd->process_ = EtcdProcess::StartWith({pki.Path("server1.crt"), pki.Path("server1.key"),
                                             pki.Path("ca1.crt"), std::move(extra_flags)});
    if (etcd->process_ == nullptr) return nullptr;
    std::ofstream(etcd->PasswordFile()) << kPassword << "\n";  // as a Secret's file may end
    for (const std::string& command :
         {absl::StrCat("user add root:", kRootPassword), std::string("user grant-role root root"),
          std::string("role add bloom"),
          absl::StrCat("role grant-permission bloom --prefix=true readwrite ", prefix),
          absl::StrCat("user add ", kUser, ":", kPassword),
          std::string("user grant-role bloom bloom"), std::string("auth enable")}) {
      if (etcd->Etcdctl(command).exit_code != 0) return nullptr;
    }
    etcd->auth_enabled_ = true;
    return etcd;
  }

  EtcdProcess& process() { return *process_; }
  std::string endpoint() const { return process_->endpoint(); }
  std::string PasswordFile() const { return scratch_.path() + "/etcd-password"; }

  // bloom-server's flags to reach this etcd as the user "bloom".
  std::vector<std::string> PodFlags() const {
    return {"--etcd_endpoints=" + endpoint(),
            "--etcd_ca_file=" + pki_.Path("ca1.crt"),
            "--etcd_cert_file=" + pki_.Path("client1.crt"),
            "--etcd_key_file=" + pki_.Path("client1.key"),
            absl::StrCat("--etcd_username=", kUser),
            "--etcd_password_file=" + PasswordFile()};
  }

  // etcdctl with the trusted client certificate, as root once auth is on; a failure is a test
  // failure.
  CommandResult Etcdctl(const std::string& arguments) const {
    CommandResult result = RunCommand(absl::StrCat(
        "ETCDCTL_API=3 etcdctl --endpoints=https://", endpoint(),
        " --cacert=", pki_.Path("ca1.crt"), " --cert=", pki_.Path("client1.crt"),
        " --key=", pki_.Path("client1.key"),
        auth_enabled_ ? absl::StrCat(" --user=root:", kRootPassword, " ") : " ", arguments));
    EXPECT_EQ(result.exit_code, 0) << "etcdctl " << arguments << ": " << result.out;
    return result;
  }

 private:
  explicit SecureEtcd(const TestPki& pki) : pki_(pki) {}

  const TestPki& pki_;
  TempDir scratch_;
  std::unique_ptr<EtcdProcess> process_;
  bool auth_enabled_ = false;
};

}  // namespace bloomtest

#endif  // TESTS_SUPPORT_SECURE_ETCD_H_
