#include "loadtest/targets.h"

#include <grpcpp/create_channel.h>
#include <hiredis/hiredis.h>

#include <cmath>
#include <cstdlib>
#include <map>
#include <mutex>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "client/bloom_client.h"
#include "loadtest/murmur3.h"

namespace loadtest {
namespace {

// What hiredis's "%llu" reads from its varargs.
using RedisULongLong = unsigned long long;  // NOLINT(google-runtime-int): printf's type

// BLOOM_BENCH_SHARD_ROUTING=1: clients of a sharded deployment send each call straight to the
// group that owns its filter (ClientOptions::shard_routing).
bool ShardRouting() {
  const char* routing = std::getenv("BLOOM_BENCH_SHARD_ROUTING");
  return routing != nullptr && std::string(routing) == "1";
}

// The pipelined client every "client"-transport thread shares: its coalescing of concurrent
// calls is what is measured. Made on first use, kept for the process.
std::shared_ptr<bloomclient::BloomClient> SharedPipelinedClient(const std::string& address) {
  static std::mutex mu;
  static auto* clients = new std::map<std::string, std::shared_ptr<bloomclient::BloomClient>>;
  std::lock_guard<std::mutex> lock(mu);
  std::shared_ptr<bloomclient::BloomClient>& client = (*clients)[address];
  if (client == nullptr) {
    bloomclient::ClientOptions options;
    options.pipelined = true;
    options.shard_routing = ShardRouting();
    // BLOOM_BENCH_PIPELINE_STREAMS: streams of the shared client (default 1).
    if (const char* streams = std::getenv("BLOOM_BENCH_PIPELINE_STREAMS"); streams != nullptr) {
      options.pipeline_streams = std::max(1, std::atoi(streams));
    }
    // BLOOM_BENCH_PIPELINE_ROUNDS: batches in flight per stream (default: the client's, 2).
    if (const char* rounds = std::getenv("BLOOM_BENCH_PIPELINE_ROUNDS"); rounds != nullptr) {
      options.pipeline_rounds = std::max(1, std::atoi(rounds));
    }
    client = bloomclient::BloomClient::Connect(address, options);
  }
  return client;
}

// bloom-server through the C++ client: unary calls (a connection per target), or the shared
// pipelined client.
class BloomTarget : public Target {
 public:
  BloomTarget(const std::string& address, uint64_t capacity, double error_rate, bool shared,
              bool cuckoo = false)
      : cuckoo_(cuckoo) {
    if (shared) {
      client_ = SharedPipelinedClient(address);
    } else {
      bloomclient::ClientOptions options;
      options.batch_size = 1 << 20;  // bloom-bench sends each batch as one request
      options.shard_routing = ShardRouting();
      client_ = bloomclient::BloomClient::Connect(address, options);
    }
    spec_.set_capacity(capacity);
    spec_.set_error_rate(error_rate);
    if (cuckoo_) spec_.set_kind(bloom::v1::FILTER_KIND_CUCKOO);
  }
  absl::Status Prepare(const std::string& name, uint64_t capacity, double error_rate) override {
    bloom::v1::FilterSpec spec;
    spec.set_capacity(capacity);
    spec.set_error_rate(error_rate);
    if (cuckoo_) spec.set_kind(bloom::v1::FILTER_KIND_CUCKOO);
    absl::Status deleted = client_->Delete(name);
    if (!deleted.ok() && !absl::IsNotFound(deleted)) return deleted;
    return client_->Reserve(name, spec).status();
  }
  absl::Status Add(const std::string& name, const std::vector<std::string>& keys,
                   std::vector<bool>& added) override {
    absl::StatusOr<std::vector<bool>> r = client_->Add(name, keys, &spec_);
    if (!r.ok()) return r.status();
    added = *std::move(r);
    return absl::OkStatus();
  }
  absl::Status MightContain(const std::string& name, const std::vector<std::string>& keys,
                            std::vector<bool>& present) override {
    // A filter not created yet holds nothing: absent_if_missing, as a per-user service asks
    // (RedisBloom's BF.MEXISTS of a missing key answers 0s the same way).
    absl::StatusOr<std::vector<bool>> r =
        client_->MightContain(name, keys, /*absent_if_missing=*/true);
    if (!r.ok()) return r.status();
    present = *std::move(r);
    return absl::OkStatus();
  }
  absl::Status Count(const std::string& name, const std::vector<std::string>& keys,
                     std::vector<uint32_t>& counts) override {
    if (!cuckoo_) return Target::Count(name, keys, counts);
    absl::StatusOr<std::vector<uint32_t>> r = client_->Count(name, keys);
    if (absl::IsNotFound(r.status())) {  // not created yet: holds nothing (as CF.COUNT says)
      counts.assign(keys.size(), 0);
      return absl::OkStatus();
    }
    if (!r.ok()) return r.status();
    counts = *std::move(r);
    return absl::OkStatus();
  }

 protected:
  bloom::v1::FilterSpec spec_;  // create_if_missing for adds

 private:
  const bool cuckoo_;  // --target=bloom-cuckoo: the filters are CUCKOO filters
  std::shared_ptr<bloomclient::BloomClient> client_;
};

// bloom-server over a raw Pipeline stream with one operation in flight: what any client
// generated from the .proto gets without coalescing. One stream per target.
class PipelineTarget : public BloomTarget {
 public:
  PipelineTarget(const std::string& address, uint64_t capacity, double error_rate)
      : BloomTarget(address, capacity, error_rate, /*shared=*/false) {
    stub_ = bloom::v1::BloomFilterService::NewStub(
        grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
    stream_ = stub_->Pipeline(&context_);
  }
  ~PipelineTarget() override {
    if (!broken_.ok()) return;  // finished already (a second Finish() aborts the process)
    stream_->WritesDone();
    (void)stream_->Finish();
  }
  absl::Status Add(const std::string& name, const std::vector<std::string>& keys,
                   std::vector<bool>& added) override {
    request_.Clear();
    bloom::v1::AddRequest* add = request_.mutable_add();
    add->set_name(name);
    add->mutable_items()->Add(keys.begin(), keys.end());
    *add->mutable_create_if_missing() = spec_;
    return RoundTrip(added);
  }
  absl::Status MightContain(const std::string& name, const std::vector<std::string>& keys,
                            std::vector<bool>& present) override {
    request_.Clear();
    bloom::v1::MightContainRequest* check = request_.mutable_might_contain();
    check->set_name(name);
    check->mutable_items()->Add(keys.begin(), keys.end());
    check->set_absent_if_missing(true);  // a filter not created yet holds nothing
    return RoundTrip(present);
  }
  absl::Status Count(const std::string& /*name*/, const std::vector<std::string>& /*keys*/,
                     std::vector<uint32_t>& /*counts*/) override {
    return absl::UnimplementedError("--transport=pipeline sends adds and checks only");
  }

 private:
  absl::Status RoundTrip(std::vector<bool>& answers) {
    if (!broken_.ok()) return broken_;
    request_.set_id(++next_id_);
    if (!stream_->Write(request_) || !stream_->Read(&response_)) {
      broken_ = absl::UnavailableError(
          absl::StrCat("the Pipeline stream broke: ", stream_->Finish().error_message()));
      return broken_;
    }
    if (response_.id() != next_id_) return absl::InternalError("answer out of order");
    if (response_.has_error()) {
      return {static_cast<absl::StatusCode>(response_.error().code()), response_.error().message()};
    }
    const auto& bits =
        response_.has_add() ? response_.add().added() : response_.might_contain().present();
    answers.assign(bits.begin(), bits.end());
    return absl::OkStatus();
  }

  std::unique_ptr<bloom::v1::BloomFilterService::Stub> stub_;
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientReaderWriter<bloom::v1::PipelineRequest, bloom::v1::PipelineResponse>>
      stream_;
  bloom::v1::PipelineRequest request_;
  bloom::v1::PipelineResponse response_;
  uint64_t next_id_ = 0;
  absl::Status broken_;  // once the stream broke (and was finished), every call answers this
};

struct RedisDeleter {
  void operator()(redisContext* c) const { redisFree(c); }
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using RedisReply = std::unique_ptr<redisReply, RedisDeleter>;

class RedisConnection {
 public:
  static absl::StatusOr<RedisConnection> Connect(const std::string& address) {
    std::vector<std::string> parts = absl::StrSplit(address, ':');
    int port = 0;
    if (parts.size() != 2 || !absl::SimpleAtoi(parts[1], &port)) {
      return absl::InvalidArgumentError(absl::StrCat("bad redis address ", address));
    }
    redisContext* c = redisConnect(parts[0].c_str(), port);
    if (c == nullptr || c->err) {
      std::string error = c != nullptr ? c->errstr : "out of memory";
      if (c != nullptr) redisFree(c);
      return absl::UnavailableError(absl::StrCat("redis ", address, ": ", error));
    }
    return RedisConnection(c);
  }
  [[nodiscard]] redisContext* Get() const { return context_.get(); }
  // Reads one pipelined reply.
  absl::StatusOr<RedisReply> Read() {
    void* reply = nullptr;
    if (redisGetReply(Get(), &reply) != REDIS_OK || reply == nullptr) {
      return absl::UnavailableError(absl::StrCat("redis: ", Get()->errstr));
    }
    RedisReply owned(static_cast<redisReply*>(reply));
    if (owned->type == REDIS_REPLY_ERROR) {
      return absl::InternalError(absl::StrCat("redis: ", owned->str));
    }
    return owned;
  }
  absl::StatusOr<RedisReply> Command(const std::vector<std::string>& args) {
    std::vector<const char*> argv;
    std::vector<size_t> lengths;
    for (const std::string& a : args) {
      argv.push_back(a.data());
      lengths.push_back(a.size());
    }
    redisAppendCommandArgv(Get(), static_cast<int>(args.size()), argv.data(), lengths.data());
    return Read();
  }

 private:
  explicit RedisConnection(redisContext* c) : context_(c) {}
  std::unique_ptr<redisContext, RedisDeleter> context_;
};

// A classic Bloom filter over a Redis bitmap: m and k from the textbook formulas, k bit
// offsets per key by double hashing of MurmurHash3-128 (Guava's scheme), pipelined
// SETBIT/GETBIT: k commands per key.
class RedisBitmapTarget : public Target {
 public:
  RedisBitmapTarget(RedisConnection connection, uint64_t capacity, double error_rate)
      : redis_(std::move(connection)) {
    bits_ = static_cast<uint64_t>(std::ceil(-static_cast<double>(capacity) * std::log(error_rate) /
                                            (std::log(2) * std::log(2))));
    k_ = std::max(
        1, static_cast<int>(std::lround(static_cast<double>(bits_) / capacity * std::log(2))));
  }
  absl::Status Prepare(const std::string& name, uint64_t, double) override {
    if (auto r = redis_.Command({"DEL", name}); !r.ok()) return r.status();
    return redis_.Command({"SETBIT", name, absl::StrCat(bits_ - 1), "0"}).status();
  }
  absl::Status Add(const std::string& name, const std::vector<std::string>& keys,
                   std::vector<bool>& added) override {
    return Run(name, keys, added, /*set_bits=*/true);
  }
  absl::Status MightContain(const std::string& name, const std::vector<std::string>& keys,
                            std::vector<bool>& present) override {
    return Run(name, keys, present, /*set_bits=*/false);
  }
  // The bitmap SETBIT would build, made here and written with SETRANGE: a 100M-key preload
  // takes seconds instead of the ~25 minutes of 700M pipelined SETBITs.
  absl::Status BulkLoad(const std::string& name, uint64_t count) override {
    std::string bitmap((bits_ + 7) / 8, '\0');
    for (uint64_t id = 0; id < count; ++id) {
      const Hash128 h = Murmur3Hash128(absl::StrCat(id));
      uint64_t combined = h.h1;
      for (int i = 0; i < k_; ++i, combined += h.h2) {
        const uint64_t offset = (combined & 0x7fffffffffffffffULL) % bits_;
        bitmap[offset / 8] |= static_cast<char>(0x80 >> (offset % 8));  // Redis: MSB first
      }
    }
    constexpr size_t kChunk = 4 << 20;
    for (size_t at = 0; at < bitmap.size(); at += kChunk) {
      const size_t length = std::min(kChunk, bitmap.size() - at);
      auto* reply = static_cast<redisReply*>(
          redisCommand(redis_.Get(), "SETRANGE %b %llu %b", name.data(), name.size(),
                       static_cast<RedisULongLong>(at), bitmap.data() + at, length));
      if (reply == nullptr) {
        return absl::UnavailableError(absl::StrCat("redis: ", redis_.Get()->errstr));
      }
      const bool error = reply->type == REDIS_REPLY_ERROR;
      const std::string message = error ? reply->str : "";
      freeReplyObject(reply);
      if (error) return absl::InternalError(absl::StrCat("redis SETRANGE: ", message));
    }
    return absl::OkStatus();
  }

 private:
  // set_bits (SETBIT): result[i] = some bit was 0 before (the key was new);
  // otherwise (GETBIT): result[i] = every bit is 1 (the key might be present).
  absl::Status Run(const std::string& name, const std::vector<std::string>& keys,
                   std::vector<bool>& result, bool set_bits) {
    for (const std::string& key : keys) {
      const Hash128 h = Murmur3Hash128(key);
      uint64_t combined = h.h1;
      for (int i = 0; i < k_; ++i, combined += h.h2) {
        const uint64_t offset = (combined & 0x7fffffffffffffffULL) % bits_;
        if (set_bits) {
          redisAppendCommand(redis_.Get(), "SETBIT %b %llu 1", name.data(), name.size(),
                             static_cast<RedisULongLong>(offset));
        } else {
          redisAppendCommand(redis_.Get(), "GETBIT %b %llu", name.data(), name.size(),
                             static_cast<RedisULongLong>(offset));
        }
      }
    }
    result.assign(keys.size(), !set_bits);
    for (size_t i = 0; i < keys.size(); ++i) {
      for (int j = 0; j < k_; ++j) {
        absl::StatusOr<RedisReply> reply = redis_.Read();
        if (!reply.ok()) return reply.status();
        if ((*reply)->integer == 0) result[i] = set_bits;  // a new bit / a missing bit
      }
    }
    return absl::OkStatus();
  }

  RedisConnection redis_;
  uint64_t bits_;
  int k_;
};

// RedisBloom's BF.MADD / BF.MEXISTS: one command per batch.
class RedisBfTarget : public Target {
 public:
  RedisBfTarget(RedisConnection connection, uint64_t capacity, double error_rate)
      : redis_(std::move(connection)),
        capacity_(absl::StrCat(capacity)),
        error_rate_(absl::StrCat(error_rate)) {}
  absl::Status Prepare(const std::string& name, uint64_t capacity, double error_rate) override {
    if (auto r = redis_.Command({"DEL", name}); !r.ok()) return r.status();
    absl::Status status =
        redis_.Command({"BF.RESERVE", name, absl::StrCat(error_rate), absl::StrCat(capacity)})
            .status();
    if (!status.ok() &&
        absl::StrContains(absl::AsciiStrToLower(status.message()), "unknown command")) {
      return absl::UnimplementedError("this Redis server has no Bloom module (BF.* commands)");
    }
    return status;
  }
  // BF.INSERT creates a missing filter with the bench's capacity and error rate, as the bloom
  // target's create_if_missing does (BF.MADD would create it with the module's defaults).
  absl::Status Add(const std::string& name, const std::vector<std::string>& keys,
                   std::vector<bool>& added) override {
    std::vector<std::string> args = {"BF.INSERT", name,        "CAPACITY", capacity_,
                                     "ERROR",     error_rate_, "ITEMS"};
    args.insert(args.end(), keys.begin(), keys.end());
    return Reply(redis_.Command(args), added);
  }
  absl::Status MightContain(const std::string& name, const std::vector<std::string>& keys,
                            std::vector<bool>& present) override {
    return Run("BF.MEXISTS", name, keys, present);
  }

 private:
  absl::Status Run(const char* command, const std::string& name,
                   const std::vector<std::string>& keys, std::vector<bool>& result) {
    std::vector<std::string> args = {command, name};
    args.insert(args.end(), keys.begin(), keys.end());
    return Reply(redis_.Command(args), result);
  }
  static absl::Status Reply(absl::StatusOr<RedisReply> reply, std::vector<bool>& result) {
    if (!reply.ok()) return reply.status();
    result.clear();
    result.reserve((*reply)->elements);
    for (size_t i = 0; i < (*reply)->elements; ++i) {
      result.push_back((*reply)->element[i]->integer != 0);
    }
    return absl::OkStatus();
  }

  RedisConnection redis_;
  const std::string capacity_, error_rate_;
};

// RedisBloom's cuckoo filters: CF.INSERT / CF.MEXISTS, one command per batch; the filter
// reserved with the module's default bucket size (2), whose 8-bit fingerprints give it a
// false-positive rate of about 2 * 2 / 255 = 1.6% whatever the bench asks.
class RedisCfTarget : public Target {
 public:
  RedisCfTarget(RedisConnection connection, uint64_t capacity)
      : redis_(std::move(connection)), capacity_(absl::StrCat(capacity)) {}
  absl::Status Prepare(const std::string& name, uint64_t capacity, double) override {
    if (auto r = redis_.Command({"DEL", name}); !r.ok()) return r.status();
    absl::Status status = redis_.Command({"CF.RESERVE", name, absl::StrCat(capacity)}).status();
    if (!status.ok() &&
        absl::StrContains(absl::AsciiStrToLower(status.message()), "unknown command")) {
      return absl::UnimplementedError("this Redis server has no Bloom module (CF.* commands)");
    }
    return status;
  }
  // CF.INSERT creates a missing filter with the bench's capacity; each item answers 1 (added)
  // or -1 (the filter is full).
  absl::Status Add(const std::string& name, const std::vector<std::string>& keys,
                   std::vector<bool>& added) override {
    std::vector<std::string> args = {"CF.INSERT", name, "CAPACITY", capacity_, "ITEMS"};
    args.insert(args.end(), keys.begin(), keys.end());
    absl::StatusOr<RedisReply> reply = redis_.Command(args);
    if (!reply.ok()) return reply.status();
    added.clear();
    for (size_t i = 0; i < (*reply)->elements; ++i) {
      if ((*reply)->element[i]->integer < 0) return absl::ResourceExhaustedError("CF is full");
      added.push_back(true);
    }
    return absl::OkStatus();
  }
  absl::Status MightContain(const std::string& name, const std::vector<std::string>& keys,
                            std::vector<bool>& present) override {
    std::vector<std::string> args = {"CF.MEXISTS", name};
    args.insert(args.end(), keys.begin(), keys.end());
    absl::StatusOr<RedisReply> reply = redis_.Command(args);
    if (!reply.ok()) return reply.status();
    present.clear();
    for (size_t i = 0; i < (*reply)->elements; ++i) {
      present.push_back((*reply)->element[i]->integer != 0);
    }
    return absl::OkStatus();
  }
  // CF.COUNT takes one item: the batch's commands go out pipelined, in one round trip.
  absl::Status Count(const std::string& name, const std::vector<std::string>& keys,
                     std::vector<uint32_t>& counts) override {
    for (const std::string& key : keys) {
      const char* argv[] = {"CF.COUNT", name.data(), key.data()};
      const size_t lengths[] = {8, name.size(), key.size()};
      redisAppendCommandArgv(redis_.Get(), 3, argv, lengths);
    }
    counts.clear();
    for (size_t i = 0; i < keys.size(); ++i) {
      absl::StatusOr<RedisReply> reply = redis_.Read();
      if (!reply.ok()) return reply.status();
      counts.push_back(static_cast<uint32_t>((*reply)->integer));
    }
    return absl::OkStatus();
  }

 private:
  RedisConnection redis_;
  const std::string capacity_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Target>> MakeTarget(const std::string& kind,
                                                   const std::string& address, uint64_t capacity,
                                                   double error_rate,
                                                   const std::string& transport) {
  if (kind == "bloom" || kind == "bloom-cuckoo") {
    if (transport == "unary" || transport == "client") {
      return std::make_unique<BloomTarget>(address, capacity, error_rate, transport == "client",
                                           kind == "bloom-cuckoo");
    }
    if (transport == "pipeline") {
      return std::make_unique<PipelineTarget>(address, capacity, error_rate);
    }
    return absl::InvalidArgumentError(
        absl::StrCat("--transport must be unary, pipeline or client, got ", transport));
  }
  if (kind == "redis-bitmap" || kind == "redis-bf" || kind == "redis-cf") {
    absl::StatusOr<RedisConnection> connection = RedisConnection::Connect(address);
    if (!connection.ok()) return connection.status();
    if (kind == "redis-cf") {
      return std::make_unique<RedisCfTarget>(*std::move(connection), capacity);
    }
    if (kind == "redis-bf") {
      return std::make_unique<RedisBfTarget>(*std::move(connection), capacity, error_rate);
    }
    return std::make_unique<RedisBitmapTarget>(*std::move(connection), capacity, error_rate);
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "--target must be bloom, bloom-cuckoo, redis-bitmap, redis-bf or redis-cf, got ", kind));
}

}  // namespace loadtest
