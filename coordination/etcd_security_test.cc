// EtcdClient against a real etcd with TLS, client certificates required and etcd's users on
// (tests/support/secure_etcd.h): every call goes through with the right CA, certificate and
// password, each wrong one is refused with a status that says which, and a token etcd stops
// accepting is replaced without the caller seeing it.
#include "coordination/etcd_security.h"

#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "coordination/etcd_client.h"
#include "gtest/gtest.h"
#include "tests/support/files.h"
#include "tests/support/secure_etcd.h"
#include "tests/support/test_pki.h"
#include "tests/support/testing.h"

namespace coordination {
namespace {

using bloomtest::SecureEtcd;
using bloomtest::StatusOf;

class EtcdSecurityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // The user "bloom" may write keys under "c1/". Tokens expire after a second without use,
    // so that a test sees one refused.
    etcd_ = SecureEtcd::Start(pki_, "c1/", {"--auth-token-ttl=1"});
    ASSERT_NE(etcd_, nullptr);
  }

  std::unique_ptr<EtcdClient> Client(EtcdSecurity security) {
    absl::StatusOr<std::unique_ptr<EtcdClient>> client =
        EtcdClient::Connect({etcd_->endpoint()}, absl::Seconds(2), std::move(security));
    EXPECT_OK(StatusOf(client));
    return client.ok() ? *std::move(client) : nullptr;
  }

  // TLS with the right CA and a client certificate, as the user "bloom".
  EtcdSecurity Trusted() const {
    EtcdSecurity security;
    security.ca_file = pki_.Path("ca1.crt");
    security.cert_file = pki_.Path("client1.crt");
    security.key_file = pki_.Path("client1.key");
    security.username = SecureEtcd::kUser;
    security.password = SecureEtcd::kPassword;
    return security;
  }

  bloomtest::TestPki pki_;
  std::unique_ptr<SecureEtcd> etcd_;
};

TEST_F(EtcdSecurityTest, EveryCallGoesThroughWithTheRightCaCertificateAndPassword) {
  std::unique_ptr<EtcdClient> client = Client(Trusted());
  ASSERT_NE(client, nullptr);
  absl::StatusOr<std::unique_ptr<EtcdWatch>> watch = client->Watch("c1/", true, 0);
  ASSERT_OK(StatusOf(watch));
  absl::StatusOr<EtcdLease> lease = client->GrantLease(absl::Seconds(30));
  ASSERT_OK(StatusOf(lease));
  ASSERT_OK(StatusOf(client->KeepAliveOnce(lease->id)));
  absl::StatusOr<bool> created = client->CreateIfAbsent("c1/leader", "pod-0", lease->id);
  ASSERT_OK(StatusOf(created));
  EXPECT_TRUE(*created);
  absl::StatusOr<KeyValue> leader = client->Get("c1/leader");
  ASSERT_OK(StatusOf(leader));
  EXPECT_EQ(leader->value, "pod-0");
  absl::StatusOr<std::vector<WatchEvent>> events = (*watch)->Next();
  ASSERT_OK(StatusOf(events));
  EXPECT_EQ(events->front().kv.key, "c1/leader");

  // Tokens unused for longer than etcd's --auth-token-ttl are refused: the client fetches a
  // new one and the call goes through. So it does after a change of the user's permissions.
  absl::SleepFor(absl::Seconds(2.5));
  ASSERT_OK(StatusOf(client->Put("c1/members/a", "1")));
  etcd_->Etcdctl("role grant-permission bloom --prefix=true read c3/");
  ASSERT_OK(StatusOf(client->Put("c1/members/b", "2")));
  EXPECT_TRUE(absl::IsNotFound(client->Get("c3/anything").status()));  // readable, and empty
  absl::SleepFor(absl::Seconds(2.5));
  // A keep-alive is not repeated (the lease keeper renews again soon): the second one, at the
  // latest, carries a new token.
  EXPECT_TRUE(client->KeepAliveOnce(lease->id).ok() || client->KeepAliveOnce(lease->id).ok());
  ASSERT_OK(client->RevokeLease(lease->id));
}

TEST_F(EtcdSecurityTest, AWrongCaNoCertificateOrPlaintextCannotConnect) {
  EtcdSecurity wrong_ca = Trusted();
  wrong_ca.ca_file = pki_.Path("ca2.crt");
  EtcdSecurity no_certificate = Trusted();
  no_certificate.cert_file.clear();
  no_certificate.key_file.clear();
  EtcdSecurity foreign_certificate = Trusted();
  foreign_certificate.cert_file = pki_.Path("client2.crt");
  foreign_certificate.key_file = pki_.Path("client2.key");
  EtcdSecurity plaintext = Trusted();
  plaintext.ca_file.clear();
  plaintext.cert_file.clear();
  plaintext.key_file.clear();
  for (const auto& [what, security] : {std::pair<std::string, EtcdSecurity>{"wrong CA", wrong_ca},
                                       {"no certificate", no_certificate},
                                       {"another CA's certificate", foreign_certificate},
                                       {"plaintext", plaintext}}) {
    std::unique_ptr<EtcdClient> client = Client(security);
    ASSERT_NE(client, nullptr);
    absl::Status put = client->Put("c1/leader", "impostor").status();
    EXPECT_TRUE(absl::IsUnavailable(put)) << what << ": " << put;
    if (what == "wrong CA") {
      EXPECT_TRUE(absl::StrContains(put.message(), "certificate verify failed")) << put;
    }
  }
  std::unique_ptr<EtcdClient> trusted = Client(Trusted());
  ASSERT_NE(trusted, nullptr);
  EXPECT_TRUE(absl::IsNotFound(trusted->Get("c1/leader").status()));
}

TEST_F(EtcdSecurityTest, AWrongPasswordOrNoUserIsRefusedAndOtherKeysAreOutOfReach) {
  std::unique_ptr<EtcdClient> client = Client(Trusted());
  ASSERT_NE(client, nullptr);
  absl::Status other = client->Put("c2/leader", "x").status();
  EXPECT_TRUE(absl::IsPermissionDenied(other)) << other;

  EtcdSecurity bad_password = Trusted();
  bad_password.password = "guess";
  std::unique_ptr<EtcdClient> guesser = Client(bad_password);
  ASSERT_NE(guesser, nullptr);
  absl::Status refused = guesser->Put("c1/leader", "impostor").status();
  EXPECT_TRUE(absl::IsUnauthenticated(refused)) << refused;
  EXPECT_TRUE(absl::StrContains(refused.message(), "\"bloom\"")) << refused;

  // Without a user, etcd takes the client certificate's common name ("client1"), who has no
  // role.
  EtcdSecurity certificate_only = Trusted();
  certificate_only.username.clear();
  certificate_only.password.clear();
  std::unique_ptr<EtcdClient> anonymous = Client(certificate_only);
  ASSERT_NE(anonymous, nullptr);
  absl::Status no_user = anonymous->Put("c1/leader", "impostor").status();
  EXPECT_TRUE(absl::IsPermissionDenied(no_user)) << no_user;
  EXPECT_TRUE(absl::IsNotFound(client->Get("c1/leader").status()));
}

TEST_F(EtcdSecurityTest, ARotatedClientCertificateIsUsedWithoutANewClient) {
  // The files start with a certificate of a CA etcd does not trust, as an expired or wrong one
  // would; then the right one is written over them, as a renewed Secret is.
  bloomtest::TempDir files;
  const std::string cert = files.path() + "/tls.crt";
  const std::string key = files.path() + "/tls.key";
  auto install = [&](const std::string& name) {
    // Key first, then certificate, each replaced at once (as a Secret's update is).
    for (const auto& [from, to] :
         {std::pair{pki_.Path(name + ".key"), key}, std::pair{pki_.Path(name + ".crt"), cert}}) {
      std::ofstream(to + ".new") << bloomtest::ReadFile(from);
      ASSERT_EQ(std::rename((to + ".new").c_str(), to.c_str()), 0);
    }
  };
  install("client2");
  EtcdSecurity security = Trusted();
  security.cert_file = cert;
  security.key_file = key;
  security.reload_interval = absl::Seconds(1);
  std::unique_ptr<EtcdClient> client = Client(security);
  ASSERT_NE(client, nullptr);
  EXPECT_TRUE(absl::IsUnavailable(client->Put("c1/members/a", "1").status()));
  install("client1");
  // Within the reload interval and a reconnection's backoff.
  EXPECT_TRUE(
      bloomtest::WaitFor([&] { return client->Put("c1/members/a", "1").ok(); }, absl::Seconds(10)))
      << client->Put("c1/members/a", "1").status();
}

TEST_F(EtcdSecurityTest, SettingsThatDoNotGoTogetherAreRefused) {
  EtcdSecurity certificate_without_key = Trusted();
  certificate_without_key.key_file.clear();
  EtcdSecurity certificate_without_ca = Trusted();
  certificate_without_ca.ca_file.clear();
  EtcdSecurity password_without_user;
  password_without_user.password = "secret";
  for (const EtcdSecurity& security :
       {certificate_without_key, certificate_without_ca, password_without_user}) {
    EXPECT_TRUE(absl::IsInvalidArgument(
        EtcdClient::Connect({etcd_->endpoint()}, absl::Seconds(1), security).status()));
  }
}

}  // namespace
}  // namespace coordination
