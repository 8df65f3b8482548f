// Reading a batched request straight from its wire bytes (service/direct_parse.h), the first
// step of every Add and MightContain call: a 1000-item MightContainRequest as the client
// libraries send it (raw_items of decimal keys), and the same with items. And gRPC's
// deserializer of a PipelineRequest (protos/wire/items_as_bytes.h) of 1 and of 1000 one-key
// operations, with and without the bound on its operations (counted before it is parsed).
//
//   build/benchmarks/parse_benchmark
#include <benchmark/benchmark.h>

#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "bloom/v1/bloom.grpc.pb.h"
#include "bloom/v1/bloom.pb.h"
#include "service/direct_parse.h"

namespace {

std::string Request(size_t items, bool raw) {
  bloom::v1::MightContainRequest request;
  request.set_name("bench");
  for (size_t i = 0; i < items; ++i) {
    const std::string key = absl::StrCat(1'000'000'000'000 + i * 7919);
    if (raw) {
      request.add_raw_items(key);
    } else {
      request.add_items(key);
    }
  }
  return request.SerializeAsString();
}

void BM_ParseMightContainRequest(benchmark::State& state) {
  const std::string wire = Request(static_cast<size_t>(state.range(0)), state.range(1) != 0);
  for (auto _ : state) {
    service::ItemsRequestView view;
    if (!service::ParseMightContainRequest(wire, &view)) state.SkipWithError("parse failed");
    benchmark::DoNotOptimize(view.items.data());
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_ParseMightContainRequest)
    ->ArgNames({"items", "raw"})
    ->Args({1000, 1})
    ->Args({1000, 0})
    ->Args({10, 1});

}  // namespace

// range(0): operations in the message; range(1): 1 with the server's bound (100,000), 0 without.
void BM_DeserializePipelineRequest(benchmark::State& state) {
  bloom::v1::PipelineRequest message;
  for (int64_t i = 0; i < state.range(0); ++i) {
    bloom::v1::PipelineRequest* op = i == 0 ? &message : message.add_more();
    op->set_id(static_cast<uint64_t>(i));
    op->mutable_add()->set_name(absl::StrCat("user-", i));
    op->mutable_add()->add_raw_items(absl::StrCat(1'000'000'000'000 + i * 7919));
  }
  grpc::ByteBuffer wire;
  bool own = false;
  if (!grpc::SerializationTraits<bloom::v1::PipelineRequest>::Serialize(message, &wire, &own)
           .ok()) {
    state.SkipWithError("serialize failed");
  }
  bloom::wire::SetMaxPipelineOperations(state.range(1) != 0 ? 100'000 : 0);
  for (auto _ : state) {
    grpc::ByteBuffer copy(wire);  // Deserialize clears what it read
    bloom::v1::PipelineRequest parsed;
    if (!grpc::SerializationTraits<bloom::v1::PipelineRequest>::Deserialize(&copy, &parsed).ok()) {
      state.SkipWithError("deserialize failed");
    }
    benchmark::DoNotOptimize(parsed.id());
  }
  bloom::wire::SetMaxPipelineOperations(0);
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_DeserializePipelineRequest)->ArgsProduct({{1, 1000}, {0, 1}});

BENCHMARK_MAIN();
