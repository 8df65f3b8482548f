// Fuzz target: the request handlers. The first byte picks an RPC, the rest is parsed as its
// request message and handled by the real BloomService against a store in a temp dir (shared
// by all inputs of a run, with a memory limit, so state accumulates like in a server).
#include <stdlib.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include "bloom/v1/bloom.pb.h"
#include "service/bloom_service.h"
#include "storage/filter_store.h"

namespace {

struct Harness {
  std::unique_ptr<storage::FilterStore> store;
  std::unique_ptr<service::BloomService> service;
};

Harness& GetHarness() {
  static Harness* harness = [] {
    auto* h = new Harness();
    std::string dir = (std::filesystem::temp_directory_path() / "bloom-fuzz-XXXXXX").string();
    if (mkdtemp(dir.data()) == nullptr) abort();
    storage::StoreOptions options;
    options.data_dir = dir;
    options.background_checkpoints = false;
    options.memory_limit_bytes = 256 << 20;
    h->store = *storage::FilterStore::Open(options);
    h->service =
        std::make_unique<service::BloomService>(h->store.get(), service::ServiceLimits{1000, 1024});
    // Filters for the fuzzer's Adds and queries to find.
    h->store->Reserve("f", {1000, 0.01}).IgnoreError();
    h->store->Reserve("fixed", {10, 0.1, 0, true}).IgnoreError();
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

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  service::BloomService& s = *GetHarness().service;
  const uint8_t method = data[0] % 6;
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
        if (r.name() != "f" && r.name() != "fixed") s.HandleDelete(r);  // keep the targets
      });
      break;
    case 5:
      Run<bloom::v1::ListRequest>(data, size, [&](const auto& r) {
        bloom::v1::ListResponse response;
        s.HandleList(r, &response);
      });
      break;
  }
  return 0;
}
