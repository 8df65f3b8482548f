#include "service/auth.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "service/token_gate.h"
#include "tests/support/testing.h"

namespace service {
namespace {

class AuthTest : public ::testing::Test {
 protected:
  std::string WriteTokens(const std::string& text) {
    // Write then rename, as a Secret update or an editor does: a new inode each time.
    const std::string tmp = path_ + ".tmp";
    std::ofstream(tmp) << text;
    EXPECT_EQ(std::rename(tmp.c_str(), path_.c_str()), 0);
    return path_;
  }

  bloomtest::TempDir dir_;
  const std::string path_ = dir_.path() + "/tokens";
};

TEST_F(AuthTest, HashIsTheSha256HexDigest) {
  // sha256("test"), as `printf %s test | sha256sum` prints it.
  EXPECT_EQ(TokenAuthenticator::HashToken("test"),
            "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08");
}

TEST_F(AuthTest, RolesDecideWhatATokenMayDo) {
  WriteTokens(absl::StrCat("# comment\n\n", TokenAuthenticator::HashToken("writer-secret"),
                           " write ingest\n", TokenAuthenticator::HashToken("reader-secret"),
                           "\tread\n"));
  absl::StatusOr<std::unique_ptr<TokenAuthenticator>> auth = TokenAuthenticator::Load(path_);
  ASSERT_OK(auth.status());
  EXPECT_EQ((*auth)->size(), 2u);

  absl::StatusOr<Caller> writer = (*auth)->Authorize("Bearer writer-secret", Role::kWrite, "Add");
  ASSERT_OK(writer.status());
  EXPECT_EQ(writer->role, Role::kWrite);
  EXPECT_EQ(writer->label, "ingest");
  EXPECT_OK((*auth)->Authorize("bearer writer-secret", Role::kRead, "Stats").status());
  EXPECT_OK((*auth)->Authorize("Bearer reader-secret", Role::kRead, "MightContain").status());

  absl::Status denied = (*auth)->Authorize("Bearer reader-secret", Role::kWrite, "Add").status();
  EXPECT_EQ(denied.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(denied.message().find("Add needs a token with role write or admin"), std::string::npos);
  EXPECT_EQ(denied.message().find("reader-secret"), std::string::npos) << "token leaked";
}

// A replication token may only replicate, and nothing else may: a client's write token
// cannot pose as a follower, and a follower's token cannot read or write filters.
TEST_F(AuthTest, TheReplicationRoleStandsApart) {
  WriteTokens(absl::StrCat(TokenAuthenticator::HashToken("writer-secret"), " write ingest\n",
                           TokenAuthenticator::HashToken("replica-secret"), " replication pods\n"));
  absl::StatusOr<std::unique_ptr<TokenAuthenticator>> auth = TokenAuthenticator::Load(path_);
  ASSERT_OK(auth.status());

  absl::StatusOr<Caller> replica =
      (*auth)->Authorize("Bearer replica-secret", Role::kReplication, "Tail");
  ASSERT_OK(replica.status());
  EXPECT_EQ(replica->role, Role::kReplication);
  absl::Status denied =
      (*auth)->Authorize("Bearer writer-secret", Role::kReplication, "Tail").status();
  EXPECT_EQ(denied.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(denied.message().find("Tail needs a token with role replication"), std::string::npos)
      << denied.message();
  for (Role role : {Role::kRead, Role::kWrite}) {
    denied = (*auth)->Authorize("Bearer replica-secret", role, "MightContain").status();
    EXPECT_EQ(denied.code(), absl::StatusCode::kPermissionDenied);
    EXPECT_NE(denied.message().find("may only replicate"), std::string::npos) << denied.message();
  }
  // Who it is, whatever the role (the transport's gate asks only that).
  absl::StatusOr<Caller> known = (*auth)->Authenticate("Bearer replica-secret");
  ASSERT_OK(known.status());
  EXPECT_EQ(known->label, "pods");
  EXPECT_EQ((*auth)->Authenticate("Bearer nobody").status().code(),
            absl::StatusCode::kUnauthenticated);
}

// An admin token may do what a write token may and also change the cluster (Switchover,
// ChangeShardMap, a slot move's journal calls); a write token may not.
TEST_F(AuthTest, OnlyTheAdminRoleChangesTheCluster) {
  WriteTokens(absl::StrCat(TokenAuthenticator::HashToken("writer-secret"), " write ingest\n",
                           TokenAuthenticator::HashToken("admin-secret"), " admin ops\n",
                           TokenAuthenticator::HashToken("replica-secret"), " replication\n"));
  absl::StatusOr<std::unique_ptr<TokenAuthenticator>> auth = TokenAuthenticator::Load(path_);
  ASSERT_OK(auth.status());
  for (Role role : {Role::kRead, Role::kWrite, Role::kAdmin}) {
    absl::StatusOr<Caller> admin = (*auth)->Authorize("Bearer admin-secret", role, "Anything");
    ASSERT_OK(admin.status());
    EXPECT_EQ(admin->role, Role::kAdmin);
  }
  for (const char* token : {"Bearer writer-secret", "Bearer replica-secret"}) {
    absl::Status denied = (*auth)->Authorize(token, Role::kAdmin, "ChangeShardMap").status();
    EXPECT_EQ(denied.code(), absl::StatusCode::kPermissionDenied) << token;
    EXPECT_NE(denied.message().find("ChangeShardMap needs a token with role admin"),
              std::string::npos)
        << denied.message();
  }
  // Replication stays apart: admin is no follower.
  EXPECT_EQ((*auth)->Authorize("Bearer admin-secret", Role::kReplication, "Tail").status().code(),
            absl::StatusCode::kPermissionDenied);
}

TEST_F(AuthTest, MissingMalformedOrUnknownTokensAreUnauthenticated) {
  WriteTokens(TokenAuthenticator::HashToken("good") + " write\n");
  absl::StatusOr<std::unique_ptr<TokenAuthenticator>> auth = TokenAuthenticator::Load(path_);
  ASSERT_OK(auth.status());
  EXPECT_EQ((*auth)->Authorize(absl::nullopt, Role::kRead, "Stats").status().code(),
            absl::StatusCode::kUnauthenticated);
  const std::vector<std::string> headers = {
      "good",         "Basic good",
      "Bearer ",      "Bearer goo",
      "Bearer good2", "Bearer " + TokenAuthenticator::HashToken("good")};  // the digest is no token
  for (const std::string& header : headers) {
    absl::Status status = (*auth)->Authorize(header, Role::kRead, "Stats").status();
    EXPECT_EQ(status.code(), absl::StatusCode::kUnauthenticated) << header << ": " << status;
  }
}

TEST_F(AuthTest, MalformedFilesAreRefusedWithTheLine) {
  const std::string digest = TokenAuthenticator::HashToken("x");
  struct Case {
    std::string text;
    std::string expected;
  };
  for (const Case& c : std::vector<Case>{
           {"plain-token write\n", "line 1: the first field must be 64 hex digits"},
           {"# ok\n" + digest + " root\n",
            "line 2: role must be read, write, admin or replication, not 'root'"},
           {digest + "\n", "line 1: expected"},
           {digest + " read a b\n", "line 1: expected"},
           {digest + " read\n" + digest + " write\n", "line 2: this token digest is listed twice"},
       }) {
    WriteTokens(c.text);
    absl::Status status = TokenAuthenticator::Load(path_).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.text;
    EXPECT_NE(status.message().find(c.expected), std::string::npos) << status;
  }
  EXPECT_EQ(TokenAuthenticator::Load(dir_.path() + "/missing").status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(AuthTest, ReloadPicksUpChangesAndKeepsTheOldTableOnErrors) {
  WriteTokens(TokenAuthenticator::HashToken("old") + " write\n");
  absl::StatusOr<std::unique_ptr<TokenAuthenticator>> auth = TokenAuthenticator::Load(path_);
  ASSERT_OK(auth.status());
  absl::StatusOr<bool> unchanged = (*auth)->Reload(/*force=*/false);
  ASSERT_OK(unchanged.status());
  EXPECT_FALSE(*unchanged);

  // Rotation: the new token works, the old one stops working.
  WriteTokens(TokenAuthenticator::HashToken("new") + " read\n");
  absl::StatusOr<bool> changed = (*auth)->Reload(/*force=*/false);
  ASSERT_OK(changed.status());
  EXPECT_TRUE(*changed);
  EXPECT_OK((*auth)->Authorize("Bearer new", Role::kRead, "Stats").status());
  EXPECT_EQ((*auth)->Authorize("Bearer old", Role::kRead, "Stats").status().code(),
            absl::StatusCode::kUnauthenticated);

  // A broken file is reported and the previous table stays in force.
  WriteTokens("garbage\n");
  EXPECT_EQ((*auth)->Reload(/*force=*/false).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_OK((*auth)->Authorize("Bearer new", Role::kRead, "Stats").status());
  // The same broken version is not re-read on every poll.
  absl::StatusOr<bool> again = (*auth)->Reload(/*force=*/false);
  ASSERT_OK(again.status());
  EXPECT_FALSE(*again);

  // A file that disappears (a Secret being replaced) is reported once; the tokens stay.
  ASSERT_EQ(std::remove(path_.c_str()), 0);
  EXPECT_EQ((*auth)->Reload(/*force=*/false).status().code(), absl::StatusCode::kNotFound);
  absl::StatusOr<bool> still_missing = (*auth)->Reload(/*force=*/false);
  ASSERT_OK(still_missing.status());
  EXPECT_FALSE(*still_missing);
  EXPECT_OK((*auth)->Authorize("Bearer new", Role::kRead, "Stats").status());

  // An empty file is valid: it revokes every token.
  WriteTokens("# nobody\n");
  ASSERT_OK((*auth)->Reload(/*force=*/true).status());
  EXPECT_EQ((*auth)->size(), 0u);
  EXPECT_EQ((*auth)->Authorize("Bearer new", Role::kRead, "Stats").status().code(),
            absl::StatusCode::kUnauthenticated);
}

}  // namespace
}  // namespace service

namespace service {
namespace {

// gRPC may run the transport's token gate after its server is gone (token_gate.h): a closed
// gate refuses without asking the authenticator or calling back, and open methods still pass.
TEST_F(AuthTest, AClosedTokenGateRefusesWithoutItsAuthenticatorOrCallback) {
  WriteTokens(TokenAuthenticator::HashToken("good") + " write\n");
  absl::StatusOr<std::unique_ptr<TokenAuthenticator>> auth = TokenAuthenticator::Load(path_);
  ASSERT_TRUE(auth.ok()) << auth.status();
  int refusals = 0;
  TokenGate gate(auth->get(), [&](const absl::Status&, absl::string_view) { ++refusals; });
  const std::string path = "/bloom.v1.BloomFilterService/Add";
  EXPECT_TRUE(gate.Check(path, "Bearer good").ok());
  EXPECT_EQ(gate.Check(path, "Bearer bad").code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(refusals, 1);
  gate.Close();
  auth->reset();  // what the gate used is gone
  EXPECT_EQ(gate.Check(path, "Bearer good").code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(gate.Check(path, "Bearer bad").code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(refusals, 1);
  EXPECT_TRUE(gate.Check("/grpc.health.v1.Health/Check", absl::nullopt).ok());
}

// Health is open and reflection closed unless the operator says otherwise; other methods never
// are open.
TEST_F(AuthTest, OpenMethodsAreTheOnesListed) {
  WriteTokens(TokenAuthenticator::HashToken("good") + " read\n");
  absl::StatusOr<std::unique_ptr<TokenAuthenticator>> auth = TokenAuthenticator::Load(path_);
  ASSERT_TRUE(auth.ok()) << auth.status();
  const std::string health = "/grpc.health.v1.Health/Check";
  const std::string reflection = "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo";
  TokenGate by_default(auth->get(), nullptr);
  EXPECT_TRUE(by_default.Check(health, absl::nullopt).ok());
  EXPECT_EQ(by_default.Check(reflection, absl::nullopt).code(), absl::StatusCode::kUnauthenticated);
  EXPECT_TRUE(by_default.Check(reflection, "Bearer good").ok());
  EXPECT_EQ(by_default.Check("/bloom.v1.BloomFilterService/Stats", absl::nullopt).code(),
            absl::StatusCode::kUnauthenticated);

  absl::StatusOr<OpenMethods> none = ParseOpenMethods("");
  ASSERT_TRUE(none.ok());
  TokenGate closed(auth->get(), nullptr, *none);
  EXPECT_EQ(closed.Check(health, absl::nullopt).code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(closed.Check(reflection, absl::nullopt).code(), absl::StatusCode::kUnauthenticated);
  EXPECT_TRUE(closed.Check(health, "Bearer good").ok());

  absl::StatusOr<OpenMethods> health_only = ParseOpenMethods(" health ");
  ASSERT_TRUE(health_only.ok());
  TokenGate probes(auth->get(), nullptr, *health_only);
  EXPECT_TRUE(probes.Check(health, absl::nullopt).ok());
  EXPECT_EQ(probes.Check(reflection, absl::nullopt).code(), absl::StatusCode::kUnauthenticated);

  absl::StatusOr<OpenMethods> both = ParseOpenMethods("reflection,health");
  ASSERT_TRUE(both.ok());
  TokenGate tools(auth->get(), nullptr, *both);
  EXPECT_TRUE(tools.Check(reflection, absl::nullopt).ok());
  EXPECT_EQ(ParseOpenMethods("health,metrics").status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace service
