#include "service/auth.h"

#include <openssl/crypto.h>
#include <openssl/sha.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace service {
namespace {

bool ParseHexDigest(absl::string_view hex, std::array<uint8_t, 32>& digest) {
  if (hex.size() != 64) return false;
  for (char c : hex) {
    if (!absl::ascii_isxdigit(static_cast<unsigned char>(c))) return false;
  }
  const std::string bytes = absl::HexStringToBytes(hex);
  std::memcpy(digest.data(), bytes.data(), digest.size());
  return true;
}

std::array<uint8_t, 32> Sha256(absl::string_view data) {
  std::array<uint8_t, 32> digest;
  SHA256(reinterpret_cast<const unsigned char*>(data.data()), data.size(), digest.data());
  return digest;
}

}  // namespace

const char* RoleName(Role role) {
  switch (role) {
    case Role::kRead:
      return "read";
    case Role::kWrite:
      return "write";
    case Role::kReplication:
      return "replication";
    case Role::kAdmin:
      return "admin";
  }
  return "unknown";
}

std::string TokenAuthenticator::HashToken(absl::string_view token) {
  const std::array<uint8_t, 32> digest = Sha256(token);
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(digest.data()), digest.size()));
}

TokenAuthenticator::FileVersion TokenAuthenticator::VersionOf(const std::string& path) {
  struct stat info {};
  if (stat(path.c_str(), &info) != 0) return {};
  return {static_cast<int64_t>(info.st_mtim.tv_sec) * 1'000'000'000 + info.st_mtim.tv_nsec,
          info.st_size, info.st_ino};
}

absl::Status TokenAuthenticator::Parse(const std::string& path, std::vector<Entry>& entries) {
  std::ifstream in(path);
  if (!in) {
    const std::string message = absl::StrCat("token file ", path, ": ", std::strerror(errno));
    return errno == ENOENT ? absl::NotFoundError(message) : absl::PermissionDeniedError(message);
  }
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    absl::string_view text = absl::StripAsciiWhitespace(line);
    if (text.empty() || text[0] == '#') continue;
    const std::vector<absl::string_view> fields =
        absl::StrSplit(text, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    auto bad = [&](absl::string_view why) {
      return absl::InvalidArgumentError(
          absl::StrCat("token file ", path, " line ", number, ": ", why));
    };
    if (fields.size() < 2 || fields.size() > 3) {
      return bad("expected '<sha256 hex> <read|write|admin|replication> [label]'");
    }
    Entry entry;
    if (!ParseHexDigest(fields[0], entry.digest)) {
      return bad("the first field must be 64 hex digits: the SHA-256 of the token, not the token");
    }
    if (fields[1] == "read") {
      entry.caller.role = Role::kRead;
    } else if (fields[1] == "write") {
      entry.caller.role = Role::kWrite;
    } else if (fields[1] == "replication") {
      entry.caller.role = Role::kReplication;
    } else if (fields[1] == "admin") {
      entry.caller.role = Role::kAdmin;
    } else {
      return bad(
          absl::StrCat("role must be read, write, admin or replication, not '", fields[1], "'"));
    }
    if (fields.size() == 3) entry.caller.label.assign(fields[2].data(), fields[2].size());
    for (const Entry& other : entries) {
      if (other.digest == entry.digest) return bad("this token digest is listed twice");
    }
    entries.push_back(std::move(entry));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<TokenAuthenticator>> TokenAuthenticator::Load(
    const std::string& path) {
  auto authenticator = std::unique_ptr<TokenAuthenticator>(new TokenAuthenticator(path));
  absl::StatusOr<bool> loaded = authenticator->Reload(/*force=*/true);
  if (!loaded.ok()) return loaded.status();
  return authenticator;
}

absl::StatusOr<bool> TokenAuthenticator::Reload(bool force) {
  // Taken before reading: a change made while we read shows up as a new version next time.
  const FileVersion version = VersionOf(path_);
  if (!force) {
    bloomsync::ReaderMutexLock lock(&mu_);
    if (version == version_) return false;
  }
  auto entries = std::make_shared<std::vector<Entry>>();
  if (absl::Status parsed = Parse(path_, *entries); !parsed.ok()) {
    bloomsync::MutexLock lock(&mu_);
    // Do not retry (and log) the same broken or missing file on every poll.
    version_ = version;
    return parsed;
  }
  bloomsync::MutexLock lock(&mu_);
  entries_ = std::move(entries);
  version_ = version;
  return true;
}

size_t TokenAuthenticator::size() const {
  bloomsync::ReaderMutexLock lock(&mu_);
  return entries_ == nullptr ? 0 : entries_->size();
}

absl::StatusOr<Caller> TokenAuthenticator::Authorize(
    absl::optional<absl::string_view> authorization, Role required,
    absl::string_view method) const {
  absl::StatusOr<Caller> caller = Authenticate(authorization);
  if (!caller.ok()) return caller;
  if (absl::Status allowed = RequireRole(*caller, required, method); !allowed.ok()) {
    return allowed;
  }
  return caller;
}

absl::StatusOr<Caller> TokenAuthenticator::Authenticate(
    absl::optional<absl::string_view> authorization) const {
  if (!authorization.has_value()) {
    return absl::UnauthenticatedError(
        "this server requires a token: send 'authorization: Bearer <token>' metadata");
  }
  absl::string_view token = absl::StripAsciiWhitespace(*authorization);
  // The scheme is case-insensitive (RFC 9110).
  if (token.size() < 7 || !absl::EqualsIgnoreCase(token.substr(0, 7), "bearer ")) {
    return absl::UnauthenticatedError("the authorization metadata must be 'Bearer <token>'");
  }
  token = absl::StripLeadingAsciiWhitespace(token.substr(7));
  const std::array<uint8_t, 32> digest = Sha256(token);

  std::shared_ptr<const std::vector<Entry>> entries;
  {
    bloomsync::ReaderMutexLock lock(&mu_);
    entries = entries_;
  }
  // Compare with every entry, always: the time taken does not depend on where a match is.
  const Entry* match = nullptr;
  if (entries != nullptr) {
    for (const Entry& entry : *entries) {
      const bool equal = CRYPTO_memcmp(entry.digest.data(), digest.data(), digest.size()) == 0;
      if (equal) match = &entry;
    }
  }
  if (match == nullptr) return absl::UnauthenticatedError("the token is not valid");
  return match->caller;
}

std::string ClientKey(const Caller& caller, const std::string& peer) {
  if (!caller.label.empty()) return absl::StrCat("the token '", caller.label, "'");
  const size_t port = peer.rfind(':');
  return absl::StrCat("the peer ", port == std::string::npos ? peer : peer.substr(0, port));
}

Role RoleFor(rpcs::Rpc rpc) {
  return rpcs::Info(rpc).access == rpcs::Access::kWrite ? Role::kWrite : Role::kRead;
}

absl::Status RequireRole(const Caller& caller, Role required, absl::string_view method) {
  bool allowed = false;
  const char* needed = "";
  switch (required) {
    case Role::kRead:
      allowed = caller.role != Role::kReplication;
      needed = "read, write or admin";
      break;
    case Role::kWrite:
      allowed = caller.role == Role::kWrite || caller.role == Role::kAdmin;
      needed = "write or admin";
      break;
    case Role::kAdmin:
      allowed = caller.role == Role::kAdmin;
      needed = "admin";
      break;
    case Role::kReplication:
      allowed = caller.role == Role::kReplication;
      needed = "replication";
      break;
  }
  if (allowed) return absl::OkStatus();
  return absl::PermissionDeniedError(absl::StrCat(
      method, " needs a token with role ", needed, "; this token",
      caller.label.empty() ? "" : absl::StrCat(" (", caller.label, ")"), " has role ",
      RoleName(caller.role),
      caller.role == Role::kReplication ? ", which may only replicate (Tail, Snapshot)" : ""));
}

}  // namespace service
