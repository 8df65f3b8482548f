// Reading a batched request straight from its wire bytes (service/direct_parse.h), the first
// step of every Add and MightContain call: a 1000-item MightContainRequest as the client
// libraries send it (raw_items of decimal keys), and the same with items.
//
//   build/benchmarks/parse_benchmark
#include <benchmark/benchmark.h>

#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
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

BENCHMARK_MAIN();
