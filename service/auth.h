// TokenAuthenticator: bearer-token authentication with a role per token.
//
// The token file holds no tokens, only their SHA-256 digests, one per line:
//
//   # sha256(token) in hex                                          role   label (optional)
//   9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08 write  ingest-job
//   60303ae22b998861bce3b28f33eec1be758a213c86c93c076dbe9f558c11c752 read   web-frontend
//
// `read` may call MightContain, Stats, List and Export; `write` may call every filter RPC;
// `admin` may also change the cluster (Switchover, ChangeShardMap, and a slot move's
// ReadJournal and ApplyJournal); `replication` may call only what a follower calls on its primary
// (bloom.replication.v1 Tail and Snapshot) and nothing else, so that a client's token can
// neither copy the whole database nor pose as a follower whose acknowledgements count. The label
// names the caller in logs (the token never appears in a log). Make tokens long and random
// (e.g. `openssl rand -hex 32`) and hash them with `bloom-cli hash-token` or
// `printf %s "$TOKEN" | sha256sum`: a digest of a random 256-bit token cannot be brute-forced,
// so a fast hash is enough.
//
// A caller sends `authorization: Bearer <token>` metadata. Authorize() hashes it and compares
// the digest with every entry in constant time (no early exit, CRYPTO_memcmp), so timing tells
// nothing about which bytes matched.
//
// Thread-safety: every method is thread-safe. Reload swaps the whole table at once; calls in
// flight finish with the table they started with.
#ifndef SERVICE_AUTH_H_
#define SERVICE_AUTH_H_

#include <sys/types.h>

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/optional.h"
#include "common/mutex.h"
#include "common/rpcs.h"

namespace service {

// kRead < kWrite < kAdmin: a write token may read, an admin token may write. kAdmin alone may
// change the cluster: Switchover, ChangeShardMap and the journal calls of a slot move
// (ReadJournal, ApplyJournal), which can pause writes, hold journals, or give a slot to a group
// that holds none of its filters. kReplication stands apart: it may do only what needs it, and
// nothing needs it but a follower's Tail and Snapshot.
enum class Role { kRead, kWrite, kReplication, kAdmin };

// "read", "write", "replication" or "admin".
const char* RoleName(Role role);

// What an authenticated caller is.
struct Caller {
  Role role = Role::kRead;
  std::string label;  // from the token file; "" if the line had none
};

// Whom per-client bounds count (--max_transfers_per_client, a follower's proxied streams): the
// token's label, else the peer's address without its port ("ipv4:10.0.0.7:51234" is
// "ipv4:10.0.0.7"), so new connections do not make a new client. Reads as a message's subject.
std::string ClientKey(const Caller& caller, const std::string& peer);

// OK if `caller` may call `method`, which needs `required` (read: a read or write token; write:
// a write token; replication: a replication token); PERMISSION_DENIED naming both roles
// otherwise. (Authorize() applies it; a stream authenticated once applies it per operation.)
absl::Status RequireRole(const Caller& caller, Role required, absl::string_view method);
// The role the RPC table (common/rpcs.h) says `rpc` needs.
Role RoleFor(rpcs::Rpc rpc);

class TokenAuthenticator {
 public:
  // Reads the token file. INVALID_ARGUMENT naming the line for a malformed one (bad digest,
  // unknown role, a digest listed twice); NOT_FOUND / PERMISSION_DENIED if it cannot be read.
  static absl::StatusOr<std::unique_ptr<TokenAuthenticator>> Load(const std::string& path);

  // `authorization` is the call's authorization metadata, if any. UNAUTHENTICATED when it is
  // missing, not a Bearer token, or no entry matches; PERMISSION_DENIED when the token's role
  // does not allow `required` (RequireRole; `method` names the call in the message).
  absl::StatusOr<Caller> Authorize(absl::optional<absl::string_view> authorization, Role required,
                                   absl::string_view method) const;
  // Who the token is, whatever its role: UNAUTHENTICATED as Authorize.
  absl::StatusOr<Caller> Authenticate(absl::optional<absl::string_view> authorization) const;

  // Re-reads the file when its size, modification time or inode changed since the last load
  // (Kubernetes updates a mounted Secret by swapping a symlink), or always with `force`.
  // Returns whether a new table was loaded. On error the previous table stays in force.
  absl::StatusOr<bool> Reload(bool force);

  size_t size() const;
  const std::string& path() const { return path_; }

  // The lowercase hex SHA-256 of `token`, as the token file lists it.
  static std::string HashToken(absl::string_view token);

 private:
  using Digest = std::array<uint8_t, 32>;
  struct Entry {
    Digest digest;
    Caller caller;
  };
  struct FileVersion {
    int64_t mtime_ns = 0;
    off_t size = 0;
    ino_t inode = 0;
    bool operator==(const FileVersion&) const = default;
  };
  explicit TokenAuthenticator(std::string path) : path_(std::move(path)) {}
  // The file's identity for change detection; all zero when it cannot be stat'ed.
  static FileVersion VersionOf(const std::string& path);
  static absl::Status Parse(const std::string& path, std::vector<Entry>& entries);

  const std::string path_;
  mutable bloomsync::Mutex mu_;
  std::shared_ptr<const std::vector<Entry>> entries_ ABSL_GUARDED_BY(mu_);
  FileVersion version_ ABSL_GUARDED_BY(mu_);
};

}  // namespace service

#endif  // SERVICE_AUTH_H_
