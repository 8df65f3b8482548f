// Throughput of the whole service over loopback gRPC: an in-process BloomServer (real RocksDB
// in a temp dir) and client threads sending batched requests through BloomClient.
//
//   build/benchmarks/service_benchmark
//
// Arguments: batch size, then threads via ->Threads(). items_per_second is keys/s over all
// client threads (client and server share the machine's cores).
#include <benchmark/benchmark.h>
#include <stdlib.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/bloom_client.h"
#include "service/server.h"
#include "storage/filter_store.h"

namespace {

constexpr uint64_t kFilterItems = 1'000'000;

struct Fixture {
  std::string dir;
  std::unique_ptr<storage::FilterStore> store;
  std::unique_ptr<service::BloomServer> server;
  std::string target;
};

Fixture* fixture = nullptr;

void SetUpServer() {
  fixture = new Fixture();
  std::string pattern = (std::filesystem::temp_directory_path() / "bloom-svc-XXXXXX").string();
  if (mkdtemp(pattern.data()) == nullptr) std::abort();
  fixture->dir = pattern;
  storage::StoreOptions options;
  options.data_dir = fixture->dir;
  fixture->store = *storage::FilterStore::Open(options);
  service::ServerOptions server_options;
  server_options.listen = "127.0.0.1:0";
  fixture->server = *service::BloomServer::Start(fixture->store.get(), server_options);
  fixture->target = absl::StrCat("127.0.0.1:", fixture->server->port());
  auto client = bloomclient::BloomClient::Connect(fixture->target);
  bloom::v1::FilterSpec spec;
  spec.set_capacity(kFilterItems);
  spec.set_error_rate(0.01);
  if (!client->Reserve("bench", spec).ok()) std::abort();
  std::vector<std::string> keys;
  for (uint64_t k = 0; k < kFilterItems; ++k) {
    keys.push_back(absl::StrCat(k));
    if (keys.size() == 10'000) {
      if (!client->Add("bench", keys).ok()) std::abort();
      keys.clear();
    }
  }
}

void TearDownServer() {
  fixture->server->Shutdown();
  if (!fixture->store->Close().ok()) std::abort();
  std::filesystem::remove_all(fixture->dir);
  delete fixture;
  fixture = nullptr;
}

std::vector<std::string> Keys(uint64_t first, size_t n) {
  std::vector<std::string> keys;
  for (size_t i = 0; i < n; ++i) keys.push_back(absl::StrCat(first + i));
  return keys;
}

// Queries: half present keys, half absent.
void BM_MightContain(benchmark::State& state) {
  const size_t batch = state.range(0);
  bloomclient::ClientOptions options;
  options.batch_size = batch;
  auto client = bloomclient::BloomClient::Connect(fixture->target, options);
  uint64_t next = (static_cast<uint64_t>(state.thread_index()) * 7919) % (2 * kFilterItems);
  for (auto _ : state) {
    state.PauseTiming();
    const std::vector<std::string> keys = Keys(next, batch);
    next = (next + batch) % (2 * kFilterItems);
    state.ResumeTiming();
    if (!client->MightContain("bench", keys).ok()) state.SkipWithError("rpc failed");
  }
  state.SetItemsProcessed(state.iterations() * batch);
}

// Adds of new keys (each thread its own key range).
void BM_Add(benchmark::State& state) {
  const size_t batch = state.range(0);
  bloomclient::ClientOptions options;
  options.batch_size = batch;
  auto client = bloomclient::BloomClient::Connect(fixture->target, options);
  uint64_t next = (static_cast<uint64_t>(state.thread_index() + 1) << 40) +
                  (static_cast<uint64_t>(batch) << 32);
  for (auto _ : state) {
    state.PauseTiming();
    const std::vector<std::string> keys = Keys(next, batch);
    next += batch;
    state.ResumeTiming();
    if (!client->Add("bench", keys).ok()) state.SkipWithError("rpc failed");
  }
  state.SetItemsProcessed(state.iterations() * batch);
}

BENCHMARK(BM_MightContain)->Arg(1)->Arg(1000)->Threads(1)->Threads(8)->UseRealTime()->MinTime(2.0);
BENCHMARK(BM_Add)->Arg(1)->Arg(1000)->Threads(1)->Threads(8)->UseRealTime()->MinTime(2.0);

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  SetUpServer();
  benchmark::RunSpecifiedBenchmarks();
  TearDownServer();
  benchmark::Shutdown();
  return 0;
}
