// Reading a batched request straight from its wire bytes (service/direct_parse.h), the first
// step of every Add and MightContain call: a 1000-item MightContainRequest as the client
// libraries send it (raw_items of decimal keys), and the same with items. A PipelineRequest
// read as the server reads it (PipelineBatch::Read: counted, then parsed into views) and, for
// comparison, by protobuf through gRPC's deserializer (protos/wire/items_as_bytes.h), with and
// without the bound on its operations: 1 and 1000 one-key operations, and one 1000-key
// operation.
//
//   build/benchmarks/parse_benchmark
#include <benchmark/benchmark.h>

#include <cstdint>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "bloom/v1/bloom.grpc.pb.h"
#include "bloom/v1/bloom.pb.h"
#include "service/direct_parse.h"
#include "service/pipeline_batch.h"

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

namespace {

// `operations` adds (the first the message's own, the rest in its `more`) of `keys` keys each.
bloom::v1::PipelineRequest PipelineMessage(int64_t operations, int64_t keys) {
  bloom::v1::PipelineRequest message;
  for (int64_t i = 0; i < operations; ++i) {
    bloom::v1::PipelineRequest* op = i == 0 ? &message : message.add_more();
    op->set_id(static_cast<uint64_t>(i));
    op->mutable_add()->set_name(absl::StrCat("user-", i));
    for (int64_t k = 0; k < keys; ++k) {
      op->mutable_add()->add_raw_items(absl::StrCat(1'000'000'000'000 + (i + k) * 7919));
    }
  }
  return message;
}

}  // namespace

// range(0): operations in the message, range(1): keys in each.
void BM_ReadPipelineRequest(benchmark::State& state) {
  const auto wire = std::make_shared<const std::string>(
      PipelineMessage(state.range(0), state.range(1)).SerializeAsString());
  for (auto _ : state) {
    absl::StatusOr<std::shared_ptr<const service::PipelineBatch::Message>> read =
        service::PipelineBatch::Read(wire, *wire, 100'000);
    if (!read.ok()) state.SkipWithError("read failed");
    benchmark::DoNotOptimize(read->get());
  }
  state.SetItemsProcessed(state.iterations() * state.range(0) * state.range(1));
}
BENCHMARK(BM_ReadPipelineRequest)
    ->ArgNames({"operations", "keys"})
    ->Args({1, 1})
    ->Args({1000, 1})
    ->Args({1, 1000});

// range(0): operations in the message; range(1): 1 with the server's bound (100,000), 0 without;
// range(2): keys in each operation.
void BM_DeserializePipelineRequest(benchmark::State& state) {
  const bloom::v1::PipelineRequest message = PipelineMessage(state.range(0), state.range(2));
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
  state.SetItemsProcessed(state.iterations() * state.range(0) * state.range(2));
}
BENCHMARK(BM_DeserializePipelineRequest)
    ->ArgNames({"operations", "bound", "keys"})
    ->Args({1, 0, 1})
    ->Args({1000, 0, 1})
    ->Args({1000, 1, 1})
    ->Args({1, 0, 1000});

BENCHMARK_MAIN();
