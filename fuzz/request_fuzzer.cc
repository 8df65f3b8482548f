// Fuzz target: the request handlers. The first byte picks an RPC, the rest is parsed as its
// request message and handled by the real BloomService against a store in a temp dir (shared
// by all inputs of a run, with a memory limit, so state accumulates like in a server).
// Choices 6 and 7 read Add / MightContain with the callback server's direct parser
// (service/direct_parse.h), which must never accept what protobuf refuses and must read what
// it accepts exactly as protobuf does; a difference aborts. Choice 8 is Merge ("f-like" is made
// like "f", so that the two can merge). Choices 9 and 10 are Remove and Count, mostly of the
// CUCKOO filter "c".
#include <stdlib.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <memory>
#include <string>
#include <system_error>
#include <vector>

#include "absl/strings/str_join.h"
#include "bloom/v1/bloom.pb.h"
#include "service/bloom_service.h"
#include "service/direct_parse.h"
#include "service/pipeline_batch.h"
#include "storage/filter_store.h"
#include "wire/items_as_bytes.h"

namespace {

struct Harness {
  std::string dir;
  std::unique_ptr<storage::FilterStore> store;
  std::unique_ptr<service::BloomService> service;
};

Harness* harness_for_exit = nullptr;

// At a normal exit (libFuzzer's -max_total_time, the replay test's end) the store is closed and
// its temp dir removed, so runs do not fill /tmp with RocksDB files. A crash
// exits without this, which keeps the dir for a look.
void RemoveHarnessDir() {
  Harness* h = harness_for_exit;
  h->service.reset();
  h->store.reset();
  std::error_code ignored;
  std::filesystem::remove_all(h->dir, ignored);
}

Harness& GetHarness() {
  static Harness* harness = [] {
    auto* h = new Harness();
    std::string dir = (std::filesystem::temp_directory_path() / "bloom-fuzz-XXXXXX").string();
    if (mkdtemp(dir.data()) == nullptr) abort();
    h->dir = dir;
    storage::StoreOptions options;
    options.data_dir = dir;
    options.background_checkpoints = false;
    options.memory_limit_bytes = 256 << 20;
    h->store = *storage::FilterStore::Open(options);
    h->service =
        std::make_unique<service::BloomService>(h->store.get(), service::ServiceLimits{1000, 1024});
    // Filters for the fuzzer's Adds and queries to find.
    h->store->Reserve("f", {1000, 0.01}).IgnoreError();
    bloom::FilterParams cuckoo{1000, 0.01};
    cuckoo.kind = bloom::FilterKind::kCuckoo;
    h->store->Reserve("c", cuckoo).IgnoreError();
    h->store->Reserve("fixed", {10, 0.1, 0, true}).IgnoreError();
    h->store->ReserveLike("f-like", "f").IgnoreError();  // merges into and from "f"
    // Registered after the store opened, so that it runs before the destructors of the
    // statics that opening created.
    harness_for_exit = h;
    std::atexit(RemoveHarnessDir);
    return h;
  }();
  return *harness;
}

template <typename Request, typename Handle>
void Run(const uint8_t* data, size_t size, Handle handle) {
  Request request;
  if (!request.ParseFromArray(data, static_cast<int>(size))) return;
  handle(request);
}

// The direct parse of `data` against protobuf's (with items as bytes); then the handler.
template <typename Request>
void RunDirect(const uint8_t* data, size_t size, bool add) {
  const absl::string_view bytes(reinterpret_cast<const char*>(data), size);
  service::ItemsRequestView view;
  const bool direct = add ? service::ParseAddRequest(bytes, &view)
                          : service::ParseMightContainRequest(bytes, &view);
  Request request;
  const bool proto = bloom::wire::ParseLeniently(std::string(bytes), &request);
  if (!direct) return;
  if (!proto) abort();  // accepted what protobuf refuses
  std::vector<absl::string_view> items(request.items().begin(), request.items().end());
  items.insert(items.end(), request.raw_items().begin(), request.raw_items().end());
  if (view.name != request.name() || view.items != items ||
      view.text_items != static_cast<size_t>(request.items_size())) {
    abort();
  }
  if constexpr (std::is_same_v<Request, bloom::v1::MightContainRequest>) {
    if (view.absent_if_missing != request.absent_if_missing()) abort();
  } else {
    bloom::v1::FilterSpec spec;
    const bool spec_parses = spec.ParseFromString(absl::StrJoin(view.create_if_missing, ""));
    if (request.has_create_if_missing() != !view.create_if_missing.empty()) abort();
    if (request.has_create_if_missing() &&
        (!spec_parses ||
         spec.SerializeAsString() != request.create_if_missing().SerializeAsString())) {
      abort();
    }
  }
  std::unique_ptr<bool[]> answers(new bool[view.items.size() + 1]);
  service::BloomService& s = *GetHarness().service;
  if (add) {
    s.HandleAddItems(view, answers.get(), nullptr);
  } else {
    s.HandleMightContainItems(view, answers.get(), nullptr);
  }
}

// The direct parse of a PipelineRequest against protobuf's; then the stream's own reading
// (PipelineBatch::Read, with a bound on operations).
void RunPipelineParse(const uint8_t* data, size_t size) {
  const absl::string_view bytes(reinterpret_cast<const char*>(data), size);
  std::vector<service::PipelineOperationView> read;
  std::deque<std::string> merged;
  const bool direct = service::ParsePipelineRequest(bytes, &read, &merged);
  bool nested = false;
  for (const service::PipelineOperationView& op : read) nested |= op.nested_more > 0;
  // A `more` nesting its own is refused by the stream whatever it holds (only its count is
  // read): nothing to compare.
  if (direct && !nested) {
    // Items are bytes: where protobuf refuses only a string that is not UTF-8, it is its reading
    // of items as bytes that must accept. That twin keeps only the last piece of an operation
    // sent in pieces (protobuf merges them, as the direct parse does), so the operations' names
    // are compared only where protobuf itself parsed the message.
    bloom::v1::PipelineRequest request;
    const bool strict = request.ParseFromArray(data, static_cast<int>(size));
    if (!strict && !bloom::wire::ParseLeniently(std::string(bytes), &request)) abort();
    if (read.size() != 1u + request.more_size()) abort();
    for (size_t i = 0; i < read.size(); ++i) {
      const bloom::v1::PipelineRequest& op =
          i == 0 ? request : request.more(static_cast<int>(i - 1));
      if (read[i].id != op.id()) abort();
      const bool kind_agrees =
          (read[i].kind == service::PipelineOperationView::Kind::kNone) ==
              (op.op_case() == bloom::v1::PipelineRequest::OP_NOT_SET) &&
          (read[i].kind == service::PipelineOperationView::Kind::kAdd) == op.has_add() &&
          (read[i].kind == service::PipelineOperationView::Kind::kRemove) == op.has_remove() &&
          (read[i].kind == service::PipelineOperationView::Kind::kCount) == op.has_count();
      if (!kind_agrees) abort();
      const std::string& name = op.has_add()      ? op.add().name()
                                : op.has_remove() ? op.remove().name()
                                : op.has_count()  ? op.count().name()
                                                  : op.might_contain().name();
      if (strict && op.op_case() != bloom::v1::PipelineRequest::OP_NOT_SET &&
          read[i].request.name != name) {
        abort();
      }
    }
  }
  auto kept = std::make_shared<const std::string>(bytes);
  (void)service::PipelineBatch::Read(kept, *kept, /*max_operations=*/64).status();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  service::BloomService& s = *GetHarness().service;
  // 0-7 as the first byte mod 8 (so saved inputs keep their handler), Merge, Remove, Count and
  // a Pipeline message's parse for bytes that are 8, 9, 10 and 11 mod 16.
  const uint8_t method = data[0] % 16 >= 8 && data[0] % 16 <= 11 ? data[0] % 16 : data[0] % 8;
  ++data;
  --size;
  switch (method) {
    case 0:
      Run<bloom::v1::ReserveRequest>(data, size, [&](const auto& r) {
        bloom::v1::ReserveResponse response;
        s.HandleReserve(r, &response);
      });
      break;
    case 1:
      Run<bloom::v1::AddRequest>(data, size, [&](const auto& r) {
        bloom::v1::AddResponse response;
        s.HandleAdd(r, &response);
      });
      break;
    case 2:
      Run<bloom::v1::MightContainRequest>(data, size, [&](const auto& r) {
        bloom::v1::MightContainResponse response;
        s.HandleMightContain(r, &response);
      });
      break;
    case 3:
      Run<bloom::v1::StatsRequest>(data, size, [&](const auto& r) {
        bloom::v1::StatsResponse response;
        s.HandleStats(r, &response);
      });
      break;
    case 4:
      Run<bloom::v1::DeleteRequest>(data, size, [&](const auto& r) {
        if (r.name() != "f" && r.name() != "fixed" && r.name() != "f-like" && r.name() != "c") {
          s.HandleDelete(r);  // keep the targets
        }
      });
      break;
    case 5:
      Run<bloom::v1::ListRequest>(data, size, [&](const auto& r) {
        bloom::v1::ListResponse response;
        s.HandleList(r, &response);
      });
      break;
    case 6:
      RunDirect<bloom::v1::AddRequest>(data, size, /*add=*/true);
      break;
    case 7:
      RunDirect<bloom::v1::MightContainRequest>(data, size, /*add=*/false);
      break;
    case 8:
      Run<bloom::v1::MergeRequest>(data, size, [&](const auto& r) {
        bloom::v1::MergeResponse response;
        s.HandleMerge(r, &response);
      });
      break;
    case 9:
      Run<bloom::v1::RemoveRequest>(data, size, [&](const auto& r) {
        bloom::v1::RemoveResponse response;
        s.HandleRemove(r, &response);
      });
      break;
    case 10:
      Run<bloom::v1::CountRequest>(data, size, [&](const auto& r) {
        bloom::v1::CountResponse response;
        s.HandleCount(r, &response);
      });
      break;
    case 11:
      RunPipelineParse(data, size);
      break;
  }
  return 0;
}
