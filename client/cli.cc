// bloom-cli: command-line client for bloom-server. The replication commands are in
// cli_replication.h, the printing of errors, JSON and stats in cli_output.h.
#include <openssl/sha.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "client/bloom_client.h"
#include "client/cli_cluster.h"
#include "client/cli_move.h"
#include "client/cli_output.h"
#include "client/cli_rebalance.h"
#include "client/cli_replication.h"

namespace {

using bloomcli::Cluster;
using bloomcli::Error;
using bloomcli::MoveSlots;
using bloomcli::PrintJson;
using bloomcli::PrintStats;
using bloomcli::Rebalance;
using bloomcli::ReplicationStatus;
using bloomcli::Switchover;

constexpr char kUsage[] =
    R"(usage: bloom-cli [--server=HOST:PORT] [--timeout=10s] [--json] [security] COMMAND ...
       bloom-cli --version

commands:
  reserve NAME --capacity=N --error-rate=P [--expansion=E] [--non-scaling]
        [--window=7d [--window-slices=8]] [--idle-ttl=30d] [--kind=bloom|cuckoo]
                              a sliding window forgets items after about 7 days; an idle
                              filter is deleted after 30 days without adds or checks
                              (durations: 90s, 15m, 12h, 7d, 1h30m); a cuckoo filter
                              can remove and count items, and has no window
  reserve NAME --like=OTHER   an empty filter like OTHER (its spec and seed), to merge with it
  add NAME ITEM...            add items given as arguments
  add NAME --file=PATH|-      add one item per line (bulk load in batches)
        [--create-capacity=N --create-error-rate=P]   create the filter if missing
        (with reserve's --expansion, --non-scaling, --window, --window-slices, --idle-ttl,
        --kind)
  check NAME ITEM...          "maybe" (probably added) or "no" (never added) per item
  check NAME --file=PATH|-
  remove NAME ITEM...         cuckoo filters: remove one copy of each item ("removed", or
  remove NAME --file=PATH|-   "absent" when the filter held none). Remove only what was
                              added: removing another item can remove a colliding one's copy
  count NAME ITEM...          cuckoo filters: the copies held of each item
  stats NAME
  list [--prefix=P] [--page-size=N]       every page, in name order
  delete NAME
  export NAME [--out=FILE]    dump to FILE (default: stdout)
  import NAME [--in=FILE] [--merge]   create NAME from a dump (default: stdin); with --merge,
                              an existing NAME (alike the dump's filter) gets it ORed in
  merge TARGET SOURCE...      OR the sources into TARGET (filters alike: reserve --like)
  health                      exit 0 if the server reports SERVING (grpc.health.v1)
  replication                 the server's role (primary or follower) and replication figures:
                              a follower's primary, sequence and lag; a primary's followers
  switchover [--to=NAME]      move the primary (failover through etcd) to the follower NAME
                              (its member name; default: the follower holding the most),
                              losing no acknowledged write; --server may name any pod.
                              Writes pause until NAME leads (about a second); --timeout
                              bounds the wait for NAME to catch up
  cluster shards              a sharded deployment (--shard_map): its groups, where each is
                              reached, and the slots each owns (any pod answers)
  cluster init GROUP... [--slots=N]   create the shard map: GROUPs (their --cluster keys)
                              own even ranges of N slots (default 4096, fixed for good)
  cluster add-group GROUP     a new group joins the map, owning no slot yet
  cluster move --slots=A-B --to=GROUP [--max-filters=N] [--copies=C] [--abort]   move slots
                              A-B (of one group) and their filters to GROUP, online, C filters
                              at once (default 4, what a pod's --max_transfers_per_client lets
                              a client run by default): writes to them pause at the end for
                              the adds since the last round (milliseconds; large CUCKOO and
                              windowed filters are copied whole then; about 2 us a filter
                              moved, so slots holding over N filters, default 300000, are
                              refused). Run it again to resume; --abort gives it up (the slots
                              stay where they were)
  cluster rebalance [--tolerance=F] [--max-moves=N] [--max-filters=N] [--dry-run]   even
                              the groups by the bytes of their filters: moves slots from the
                              heaviest group to the lightest until each is within F (default
                              0.1) of the mean, at most N filters a move (default 300000: the
                              write pause grows with them; a slot holding more moves alone)
  hash-token                  read a token on stdin, print the line digest for a token file

security (for servers with TLS or --auth_token_file):
  --tls                       connect with TLS (verified against the system's roots)
  --tls-ca=FILE               ... or against these PEM roots (implies --tls)
  --tls-cert=FILE --tls-key=FILE   client certificate for mutual TLS (implies --tls)
  --tls-server-name=NAME      the name to verify in the server's certificate
  --token-file=FILE           send the token in FILE; default: $BLOOM_TOKEN if set

The server defaults to $BLOOM_SERVER, else 127.0.0.1:50051. Exit status: 0 on success,
1 on an error from the server (one line on stderr), 2 on bad usage.
)";

struct Args {
  std::vector<std::string> positional;
  std::map<std::string, std::string> options;  // --key=value; --flag maps to "true"

  [[nodiscard]] bool Has(const std::string& key) const { return options.count(key) > 0; }
  [[nodiscard]] std::string Get(const std::string& key, const std::string& fallback = "") const {
    auto it = options.find(key);
    return it == options.end() ? fallback : it->second;
  }
};

Args Parse(int argc, char** argv) {
  Args args;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (absl::StartsWith(arg, "--")) {
      const size_t eq = arg.find('=');
      if (eq == std::string::npos) {
        args.options[arg.substr(2)] = "true";
      } else {
        args.options[arg.substr(2, eq - 2)] = arg.substr(eq + 1);
      }
    } else {
      args.positional.push_back(arg);
    }
  }
  return args;
}

int Usage(absl::string_view problem) {
  std::fprintf(stderr, "bloom-cli: %s\n\n%s", static_cast<std::string>(problem).c_str(), kUsage);
  return 2;
}

// "7d", "36h", "90s", "1h30m": whole days, or anything absl::ParseDuration takes.
bool ParseCliDuration(const std::string& text, google::protobuf::Duration* out) {
  absl::Duration d;
  int64_t days = 0;
  if (absl::EndsWith(text, "d") && absl::SimpleAtoi(text.substr(0, text.size() - 1), &days)) {
    d = absl::Hours(24) * days;
  } else if (!absl::ParseDuration(text, &d)) {
    return false;
  }
  const absl::Duration whole = absl::Trunc(d, absl::Seconds(1));
  out->set_seconds(absl::ToInt64Seconds(whole));
  out->set_nanos(static_cast<int32_t>(absl::ToInt64Nanoseconds(d - whole)));
  return true;
}

bool ParseSpec(const Args& args, const std::string& capacity_key, const std::string& rate_key,
               bloom::v1::FilterSpec& spec) {
  uint64_t capacity = 0;
  double rate = 0;
  uint32_t expansion = 0;
  if (!absl::SimpleAtoi(args.Get(capacity_key), &capacity) ||
      !absl::SimpleAtod(args.Get(rate_key), &rate) ||
      (args.Has("expansion") && !absl::SimpleAtoi(args.Get("expansion"), &expansion))) {
    return false;
  }
  spec.set_capacity(capacity);
  spec.set_error_rate(rate);
  spec.set_expansion(expansion);
  spec.set_non_scaling(args.Has("non-scaling"));
  uint32_t slices = 0;
  if ((args.Has("window") && !ParseCliDuration(args.Get("window"), spec.mutable_window())) ||
      (args.Has("idle-ttl") && !ParseCliDuration(args.Get("idle-ttl"), spec.mutable_idle_ttl())) ||
      (args.Has("window-slices") && !absl::SimpleAtoi(args.Get("window-slices"), &slices))) {
    return false;
  }
  spec.set_window_slices(slices);
  const std::string kind = args.Get("kind", "bloom");
  if (kind == "cuckoo") {
    spec.set_kind(bloom::v1::FILTER_KIND_CUCKOO);
  } else if (kind != "bloom") {
    return false;
  }
  return true;
}

// Streams lines of `path` ("-" = stdin) in batches to `process`, with a progress line on a
// terminal. Returns the first error.
absl::Status ForEachBatch(
    const std::string& path, size_t batch_size,
    const std::function<absl::Status(const std::vector<std::string>&)>& process) {
  std::ifstream file;
  std::istream* in = &std::cin;
  uint64_t total_bytes = 0;
  if (path != "-") {
    file.open(path, std::ios::binary | std::ios::ate);
    if (!file) return absl::NotFoundError(absl::StrCat("cannot open ", path));
    total_bytes = static_cast<uint64_t>(file.tellg());
    file.seekg(0);
    in = &file;
  }
  const bool progress = isatty(STDERR_FILENO) != 0;
  const absl::Time start = absl::Now();
  std::vector<std::string> batch;
  uint64_t done = 0, bytes = 0;
  std::string line;
  auto flush = [&]() -> absl::Status {
    if (batch.empty()) return absl::OkStatus();
    absl::Status status = process(batch);
    done += batch.size();
    batch.clear();
    if (progress) {
      const double seconds = std::max(1e-3, absl::ToDoubleSeconds(absl::Now() - start));
      if (total_bytes > 0) {
        const int percent = static_cast<int>(100.0 * bytes / total_bytes);
        const int bar = percent / 4;
        std::fprintf(stderr, "\r[%-25s] %3d%%  %llu items  %.0f items/s",
                     std::string(bar, '#').c_str(), percent, static_cast<unsigned long long>(done),
                     done / seconds);
      } else {
        std::fprintf(stderr, "\r%llu items  %.0f items/s", static_cast<unsigned long long>(done),
                     done / seconds);
      }
    }
    return status;
  };
  while (std::getline(*in, line)) {
    bytes += line.size() + 1;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    batch.push_back(std::move(line));
    if (batch.size() == batch_size) {
      if (absl::Status s = flush(); !s.ok()) return s;
    }
  }
  absl::Status status = flush();
  if (progress) std::fprintf(stderr, "\n");
  return status;
}

// The token file line digest: lowercase hex SHA-256 of the token read from stdin (one line;
// surrounding whitespace is not part of it).
int HashToken() {
  std::string token;
  std::getline(std::cin, token);
  token = std::string(absl::StripAsciiWhitespace(token));
  if (token.empty()) return Usage("hash-token reads a token on stdin");
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(token.data()), token.size(), digest);
  std::cout << absl::BytesToHexString(
                   absl::string_view(reinterpret_cast<char*>(digest), sizeof(digest)))
            << "\n";
  return 0;
}

int Run(const Args& args) {
  if (args.positional.empty()) return Usage("no command");
  const std::string& command = args.positional[0];
  const char* env_server = std::getenv("BLOOM_SERVER");
  const std::string server =
      args.Get("server", env_server != nullptr ? env_server : "127.0.0.1:50051");
  bloomclient::ClientOptions options;
  if (args.Has("timeout") && !absl::ParseDuration(args.Get("timeout"), &options.timeout)) {
    return Usage("--timeout must be a duration such as 10s");
  }
  if (command == "hash-token") return HashToken();
  options.tls.ca_file = args.Get("tls-ca");
  options.tls.cert_file = args.Get("tls-cert");
  options.tls.key_file = args.Get("tls-key");
  options.tls.server_name = args.Get("tls-server-name");
  options.tls.enabled =
      args.Has("tls") || !options.tls.ca_file.empty() || !options.tls.cert_file.empty();
  if (args.Has("token-file")) {
    std::ifstream in(args.Get("token-file"));
    if (!in || !std::getline(in, options.token) || options.token.empty()) {
      return Usage(absl::StrCat("cannot read a token from --token-file=", args.Get("token-file")));
    }
  } else if (const char* token = std::getenv("BLOOM_TOKEN"); token != nullptr) {
    options.token = token;
  }
  const bool json = args.Has("json");
  absl::StatusOr<std::unique_ptr<bloomclient::BloomClient>> opened =
      bloomclient::BloomClient::Open(server, options);
  if (!opened.ok()) return Usage(opened.status().message());
  bloomclient::BloomClient* client = opened->get();
  if (command == "health") {
    absl::StatusOr<bool> serving = client->Serving();
    if (!serving.ok()) return Error(serving.status());
    std::cout << (*serving ? "SERVING" : "NOT_SERVING") << "\n";
    return *serving ? 0 : 1;
  }
  if (command == "replication") return ReplicationStatus(*client, json);
  if (command == "switchover") return Switchover(*client, server, options, args.Get("to"), json);
  if (command == "cluster") {
    if (args.positional.size() > 1 && args.positional[1] == "rebalance") {
      return Rebalance(*client, options,
                       {.tolerance = args.Get("tolerance"),
                        .max_moves = args.Get("max-moves"),
                        .max_filters = args.Get("max-filters"),
                        .dry_run = args.Has("dry-run")});
    }
    if (args.positional.size() > 1 && args.positional[1] == "move") {
      return MoveSlots(*client, options,
                       {.slots = args.Get("slots"),
                        .to = args.Get("to"),
                        .max_filters = args.Get("max-filters"),
                        .copies = args.Get("copies"),
                        .abort = args.Has("abort")});
    }
    return Cluster(*client, {args.positional.begin() + 1, args.positional.end()}, args.Get("slots"),
                   json);
  }
  const std::string name = args.positional.size() > 1 ? args.positional[1] : "";
  if (command != "list" && name.empty()) return Usage(absl::StrCat(command, " needs a NAME"));
  const std::vector<std::string> items(
      args.positional.begin() + std::min<size_t>(2, args.positional.size()), args.positional.end());

  if (command == "reserve") {
    const bool like = args.Has("like");
    bloom::v1::FilterSpec spec;
    if (like && (args.Has("capacity") || args.Has("error-rate"))) {
      return Usage("reserve takes --like or a spec (--capacity, --error-rate), not both");
    }
    if (!like && !ParseSpec(args, "capacity", "error-rate", spec)) {
      return Usage(
          "reserve needs --capacity=N and --error-rate=P (and durations like 7d or 12h for "
          "--window and --idle-ttl, --kind=bloom or cuckoo), or --like=OTHER");
    }
    absl::StatusOr<bloom::v1::ReserveResponse> r =
        like ? client->ReserveLike(name, args.Get("like")) : client->Reserve(name, spec);
    if (!r.ok()) return Error(r.status());
    if (json) {
      PrintJson(*r);
    } else {
      std::cout << (r->created() ? "created " : "exists (same spec) ") << name << "\n";
    }
    return 0;
  }
  if (command == "merge") {
    if (items.empty()) return Usage("merge needs a TARGET and at least one SOURCE");
    absl::StatusOr<bloom::v1::FilterStats> merged = client->Merge(name, items);
    if (!merged.ok()) return Error(merged.status());
    if (json) {
      PrintJson(*merged);
    } else {
      std::cout << absl::StrFormat(
          "merged %d filter(s) into %s: about %.0f distinct items, estimated error rate %.4g\n",
          items.size(), name, merged->estimated_cardinality(), merged->estimated_error_rate());
    }
    return 0;
  }
  if (command == "count") {
    if (items.empty()) return Usage("count needs items");
    absl::StatusOr<std::vector<uint32_t>> counts = client->Count(name, items);
    if (!counts.ok()) return Error(counts.status());
    if (json) {
      std::cout << "{\"counts\": [" << absl::StrJoin(*counts, ", ") << "]}\n";
    } else {
      for (size_t i = 0; i < counts->size(); ++i) {
        std::cout << items[i] << "\t" << (*counts)[i] << "\n";
      }
    }
    return 0;
  }
  if (command == "add" || command == "check" || command == "remove") {
    const bool add = command == "add";
    const bool remove = command == "remove";
    // What each answer means, per command: added / present / removed.
    const char* const key = add ? "added" : remove ? "removed" : "present";
    const char* const yes = add ? "new" : remove ? "removed" : "maybe";
    const char* const no = add ? "present" : remove ? "absent" : "no";
    bloom::v1::FilterSpec create;
    const bool create_if_missing = args.Has("create-capacity");
    if (create_if_missing && !ParseSpec(args, "create-capacity", "create-error-rate", create)) {
      return Usage("--create-capacity needs --create-error-rate (and --kind=bloom or cuckoo)");
    }
    if (args.Has("file")) {
      uint64_t total = 0, hits = 0;
      absl::Status status = ForEachBatch(
          args.Get("file"), options.batch_size, [&](const std::vector<std::string>& batch) {
            absl::StatusOr<std::vector<bool>> r =
                add      ? client->Add(name, batch, create_if_missing ? &create : nullptr)
                : remove ? client->Remove(name, batch)
                         : client->MightContain(name, batch);
            if (!r.ok()) return r.status();
            total += r->size();
            for (bool b : *r) hits += b;
            return absl::OkStatus();
          });
      if (!status.ok()) return Error(status);
      if (json) {
        std::cout << absl::StrFormat("{\"items\": %d, \"%s\": %d}\n", total,
                                     add      ? "new"
                                     : remove ? "removed"
                                              : "present",
                                     hits);
      } else {
        std::cout << absl::StrFormat("%d items: %d %s\n", total, hits,
                                     add      ? "new"
                                     : remove ? "removed"
                                              : "maybe present");
      }
      return 0;
    }
    if (items.empty()) return Usage(absl::StrCat(command, " needs items or --file"));
    absl::StatusOr<std::vector<bool>> r =
        add      ? client->Add(name, items, create_if_missing ? &create : nullptr)
        : remove ? client->Remove(name, items)
                 : client->MightContain(name, items);
    if (!r.ok()) return Error(r.status());
    if (json) {
      std::cout << "{\"" << key << "\": [";
      for (size_t i = 0; i < r->size(); ++i) {
        std::cout << (i ? ", " : "") << ((*r)[i] ? "true" : "false");
      }
      std::cout << "]}\n";
    } else {
      for (size_t i = 0; i < r->size(); ++i) {
        std::cout << items[i] << "\t" << ((*r)[i] ? yes : no) << "\n";
      }
    }
    return 0;
  }
  if (command == "stats") {
    absl::StatusOr<bloom::v1::FilterStats> s = client->Stats(name);
    if (!s.ok()) return Error(s.status());
    json ? PrintJson(*s) : PrintStats(*s);
    return 0;
  }
  if (command == "list") {
    uint32_t page_size = 0;
    if (args.Has("page-size") && !absl::SimpleAtoi(args.Get("page-size"), &page_size)) {
      return Usage("--page-size must be a number");
    }
    bloom::v1::ListResponse all;
    std::string token;
    do {
      absl::StatusOr<bloom::v1::ListResponse> page =
          client->List(args.Get("prefix"), page_size, token);
      if (!page.ok()) return Error(page.status());
      for (const auto& f : page->filters()) *all.add_filters() = f;
      token = page->next_page_token();
    } while (!token.empty());
    if (json) {
      PrintJson(all);
    } else {
      for (const auto& f : all.filters()) {
        std::cout << absl::StrFormat("%s\titems_added=%d\tsize_bytes=%d\tsub_filters=%d\n",
                                     f.name(), f.items_added(), f.size_bytes(), f.sub_filters());
      }
    }
    return 0;
  }
  if (command == "delete") {
    if (absl::Status s = client->Delete(name); !s.ok()) return Error(s);
    if (!json) std::cout << "deleted " << name << "\n";
    return 0;
  }
  if (command == "export") {
    const std::string out_path = args.Get("out", "-");
    std::ofstream file;
    if (out_path != "-") {
      file.open(out_path, std::ios::binary);
      if (!file) return Error(absl::UnavailableError(absl::StrCat("cannot write ", out_path)));
    }
    absl::Status s = client->Export(name, out_path == "-" ? std::cout : file);
    return s.ok() ? 0 : Error(s);
  }
  if (command == "import") {
    const std::string in_path = args.Get("in", "-");
    std::ifstream file;
    if (in_path != "-") {
      file.open(in_path, std::ios::binary);
      if (!file) return Error(absl::NotFoundError(absl::StrCat("cannot open ", in_path)));
    }
    absl::StatusOr<bloom::v1::FilterStats> s =
        client->Import(name, in_path == "-" ? std::cin : file, args.Has("merge"));
    if (!s.ok()) return Error(s.status());
    json ? PrintJson(*s) : PrintStats(*s);
    return 0;
  }
  return Usage(absl::StrCat("unknown command '", command, "'"));
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = Parse(argc, argv);
  if (args.Has("help") || args.Has("h")) {
    std::cout << kUsage;
    return 0;
  }
  if (args.Has("version")) {
    std::cout << "bloom-cli " << BLOOM_VERSION << "\n";
    return 0;
  }
  return Run(args);
}
