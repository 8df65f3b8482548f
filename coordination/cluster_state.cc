// Cluster records and the takeover rule (cluster_state.h).
#include "coordination/cluster_state.h"

#include <openssl/sha.h>

#include <algorithm>
#include <map>
#include <set>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace coordination {
namespace {

// `key=value` words separated by spaces. Unknown keys are kept out of the way (a later
// version may add some); a word without '=' is an error.
absl::StatusOr<std::map<std::string, std::string>> Words(absl::string_view text,
                                                         absl::string_view what) {
  std::map<std::string, std::string> words;
  for (absl::string_view word : absl::StrSplit(text, ' ', absl::SkipEmpty())) {
    const size_t equals = word.find('=');
    if (equals == absl::string_view::npos || equals == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " record: \"", word, "\" is not key=value"));
    }
    words.insert_or_assign(std::string{word.substr(0, equals)},
                           std::string{word.substr(equals + 1)});
  }
  return words;
}

absl::StatusOr<std::string> Text(const std::map<std::string, std::string>& words,
                                 const std::string& key, absl::string_view what) {
  auto it = words.find(key);
  if (it == words.end() || it->second.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(what, " record: no ", key));
  }
  return it->second;
}

template <typename Int>
absl::StatusOr<Int> Number(const std::map<std::string, std::string>& words, const std::string& key,
                           absl::string_view what) {
  absl::StatusOr<std::string> text = Text(words, key, what);
  if (!text.ok()) return text.status();
  Int value = 0;
  if (!absl::SimpleAtoi(*text, &value)) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " record: ", key, "=", *text, " is not a number"));
  }
  return value;
}

bool HigherHolder(const MemberRecord* a, const MemberRecord* b) {
  if (a->sequence != b->sequence) return a->sequence > b->sequence;
  return a->name < b->name;
}

}  // namespace

std::string ProofOf(absl::string_view secret) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(secret.data()), secret.size(), digest);
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(digest), sizeof(digest)));
}

std::string Encode(const MemberRecord& record) {
  std::string text = absl::StrCat("name=", record.name, " address=", record.address,
                                  " sequence=", record.sequence, " term=", record.term);
  if (!record.proof.empty()) absl::StrAppend(&text, " proof=", record.proof);
  return text;
}

std::string Encode(const LeaderRecord& record) {
  return absl::StrCat("name=", record.name, " address=", record.address,
                      " start_sequence=", record.start_sequence);
}

std::string Encode(const SyncSet& set) {
  std::string text =
      absl::StrCat("leader=", set.leader, " term=", set.term, " required=", set.required,
                   " names=", absl::StrJoin(set.names, ","));
  if (!set.handover_to.empty()) {
    absl::StrAppend(&text, " handover_to=", set.handover_to,
                    " handover_sequence=", set.handover_sequence);
  }
  return text;
}

absl::StatusOr<MemberRecord> DecodeMember(absl::string_view text) {
  constexpr absl::string_view kWhat = "member";
  absl::StatusOr<std::map<std::string, std::string>> words = Words(text, kWhat);
  if (!words.ok()) return words.status();
  absl::StatusOr<std::string> name = Text(*words, "name", kWhat);
  absl::StatusOr<std::string> address = Text(*words, "address", kWhat);
  absl::StatusOr<uint64_t> sequence = Number<uint64_t>(*words, "sequence", kWhat);
  absl::StatusOr<int64_t> term = Number<int64_t>(*words, "term", kWhat);
  for (const absl::Status& status :
       {name.status(), address.status(), sequence.status(), term.status()}) {
    if (!status.ok()) return status;
  }
  MemberRecord record{*name, *address, *sequence, *term, {}};
  if (auto proof = words->find("proof"); proof != words->end()) record.proof = proof->second;
  return record;
}

absl::StatusOr<LeaderRecord> DecodeLeader(absl::string_view text) {
  constexpr absl::string_view kWhat = "leader";
  absl::StatusOr<std::map<std::string, std::string>> words = Words(text, kWhat);
  if (!words.ok()) return words.status();
  absl::StatusOr<std::string> name = Text(*words, "name", kWhat);
  absl::StatusOr<std::string> address = Text(*words, "address", kWhat);
  absl::StatusOr<uint64_t> start = Number<uint64_t>(*words, "start_sequence", kWhat);
  for (const absl::Status& status : {name.status(), address.status(), start.status()}) {
    if (!status.ok()) return status;
  }
  return LeaderRecord{*name, *address, *start};
}

absl::StatusOr<SyncSet> DecodeSyncSet(absl::string_view text) {
  constexpr absl::string_view kWhat = "sync set";
  absl::StatusOr<std::map<std::string, std::string>> words = Words(text, kWhat);
  if (!words.ok()) return words.status();
  absl::StatusOr<std::string> leader = Text(*words, "leader", kWhat);
  absl::StatusOr<int64_t> term = Number<int64_t>(*words, "term", kWhat);
  absl::StatusOr<int> required = Number<int>(*words, "required", kWhat);
  for (const absl::Status& status : {leader.status(), term.status(), required.status()}) {
    if (!status.ok()) return status;
  }
  if (*required < 0) return absl::InvalidArgumentError("sync set record: required < 0");
  auto names = words->find("names");
  if (names == words->end()) return absl::InvalidArgumentError("sync set record: no names");
  SyncSet set{.leader = *leader, .term = *term, .required = *required, .names = {}};
  for (absl::string_view name : absl::StrSplit(names->second, ',', absl::SkipEmpty())) {
    set.names.emplace_back(name);
  }
  if (words->count("handover_to") > 0) {
    absl::StatusOr<std::string> to = Text(*words, "handover_to", kWhat);
    absl::StatusOr<uint64_t> sequence = Number<uint64_t>(*words, "handover_sequence", kWhat);
    for (const absl::Status& status : {to.status(), sequence.status()}) {
      if (!status.ok()) return status;
    }
    set.handover_to = *to;
    set.handover_sequence = *sequence;
  }
  return set;
}

std::string MembersPrefix(absl::string_view cluster) { return absl::StrCat(cluster, "/members/"); }
std::string MemberKey(absl::string_view cluster, absl::string_view name) {
  return absl::StrCat(cluster, "/members/", name);
}
std::string LeaderKey(absl::string_view cluster) { return absl::StrCat(cluster, "/leader"); }
std::string SyncKey(absl::string_view cluster) { return absl::StrCat(cluster, "/sync"); }
std::string ElectionKey(absl::string_view cluster) { return absl::StrCat(cluster, "/election"); }

TakeoverDecision MayTakeOver(const std::string& me, const std::vector<MemberRecord>& members,
                             const SyncSet* sync) {
  TakeoverDecision decision;
  if (sync != nullptr && !sync->handover_to.empty()) {
    for (const MemberRecord& member : members) {
      if (member.name == sync->handover_to && member.sequence >= sync->handover_sequence) {
        decision.allowed = member.name == me;
        decision.candidate = member.name;
        decision.reason = absl::StrCat("the primary of term ", sync->term, " (", sync->leader,
                                       ") handed over to ", member.name, ", which holds sequence ",
                                       member.sequence, " (", sync->handover_sequence, " needed)");
        return decision;
      }
    }
    // The target is down (or lost its data): the ordinary rule, which the set still allows.
  }
  std::vector<const MemberRecord*> counted;  // the members that may be chosen
  if (sync == nullptr || sync->required == 0) {
    for (const MemberRecord& member : members) counted.push_back(&member);
    decision.reason = sync == nullptr ? "no sync set was ever written"
                                      : "the last primary did not wait for acknowledgements";
  } else {
    uint64_t most = 0;
    for (const MemberRecord& member : members) most = std::max(most, member.sequence);
    for (const MemberRecord& member : members) {
      // It holds all it acknowledged, and so leads again, unless it holds less than a follower
      // does (its data dir was lost or replaced): then it counts as nobody.
      if (member.name == sync->leader && member.sequence >= most && member.sequence > 0) {
        decision.allowed = member.name == me;
        decision.candidate = member.name;
        decision.reason =
            absl::StrCat("the primary of term ", sync->term, " (", sync->leader, ") is back");
        return decision;
      }
    }
    const std::set<std::string> in_set(sync->names.begin(), sync->names.end());
    for (const MemberRecord& member : members) {
      // One that holds nothing (its data dir was lost, and there is no primary to copy from)
      // cannot be the one holding every acknowledged write.
      if (in_set.count(member.name) > 0 && member.sequence > 0) counted.push_back(&member);
    }
    const int set_size = static_cast<int>(in_set.size());
    const int needed = std::max(1, set_size - sync->required + 1);
    if (static_cast<int>(counted.size()) < needed) {
      decision.reason = absl::StrCat(
          counted.size(), " of the sync set {", absl::StrJoin(sync->names, ","), "} of term ",
          sync->term, " are up, and ", needed, " are needed to be sure one holds ",
          "every write acknowledged with min_replica_acks=", sync->required);
      return decision;
    }
    decision.reason = absl::StrCat(counted.size(), " of the sync set of term ", sync->term,
                                   " are up (", needed, " needed)");
  }
  if (counted.empty()) {
    decision.reason = "no member is up";
    return decision;
  }
  const MemberRecord* best = *std::min_element(counted.begin(), counted.end(), HigherHolder);
  decision.candidate = best->name;
  decision.allowed = best->name == me;
  absl::StrAppend(&decision.reason, "; ", best->name, " holds the most (sequence ", best->sequence,
                  ")");
  return decision;
}

}  // namespace coordination
