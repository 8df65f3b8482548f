#include "client/bloom_client.h"

#include <grpcpp/client_context.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/security/credentials.h>

#include <algorithm>
#include <condition_variable>
#include <fstream>
#include <mutex>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "client/reconnect_poller.h"
#include "client/shard_routes.h"

namespace bloomclient {
namespace {

std::vector<std::string> Decimal(absl::Span<const int64_t> values) {
  std::vector<std::string> items;
  items.reserve(values.size());
  for (int64_t v : values) items.push_back(absl::StrCat(v));
  return items;
}

}  // namespace

absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  return {static_cast<absl::StatusCode>(status.error_code()), status.error_message()};
}

namespace {

// round_robin: a target that names several pods (a headless Service's DNS name, or
// "ipv4:a:p,b:p") gets a connection to each and spreads the calls over those that answer; any
// pod serves any call, and a pod that goes away is out of the rotation once its connection is
// seen closed. One address behaves as with gRPC's default (pick_first).
// The reads are retried (on the next pod) when they fail UNAVAILABLE: this client reads a
// connection's end only while a call polls, so the first call sent to a pod that went away
// while the client was idle fails. Writes are not: an add whose answer was lost may have been
// made (the caller retries it, knowing that), and a remove must not be made twice.
constexpr char kServiceConfig[] = R"json({
  "loadBalancingConfig": [{"round_robin": {}}],
  "methodConfig": [{
    "name": [
      {"service": "bloom.v1.BloomFilterService", "method": "MightContain"},
      {"service": "bloom.v1.BloomFilterService", "method": "Count"},
      {"service": "bloom.v1.BloomFilterService", "method": "Stats"},
      {"service": "bloom.v1.BloomFilterService", "method": "List"}
    ],
    "retryPolicy": {
      "maxAttempts": 3,
      "initialBackoff": "0.01s",
      "maxBackoff": "0.1s",
      "backoffMultiplier": 2,
      "retryableStatusCodes": ["UNAVAILABLE"]
    }
  }]
})json";

grpc::ChannelArguments DefaultChannelArguments() {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);  // a MightContain answer grows with its batch
  args.SetMaxSendMessageSize(-1);
  // A pod that restarts, or rebuilds its server in a new role when the primary fails over, is
  // back within a second or so: try it again every few hundred milliseconds rather than after
  // gRPC's default backoff (1 s, growing to 2 min), during which every call fails at once.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 200);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 200);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 5'000);
  args.SetServiceConfigJSON(kServiceConfig);
  return args;
}

absl::StatusOr<std::string> ReadPem(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read the ", what, " file ", path));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

std::unique_ptr<BloomClient> BloomClient::Connect(const std::string& target,
                                                  ClientOptions options) {
  auto connect = [](const std::string& address) {
    return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(),
                                     DefaultChannelArguments());
  };
  return std::make_unique<BloomClient>(connect(target), std::move(options), connect);
}

absl::StatusOr<std::unique_ptr<BloomClient>> BloomClient::Open(const std::string& target,
                                                               ClientOptions options) {
  if (!options.tls.enabled) return Connect(target, std::move(options));
  const ClientTls& tls = options.tls;
  if (tls.cert_file.empty() != tls.key_file.empty()) {
    return absl::InvalidArgumentError("a client certificate needs both cert_file and key_file");
  }
  grpc::SslCredentialsOptions ssl;
  if (!tls.ca_file.empty()) {
    absl::StatusOr<std::string> ca = ReadPem(tls.ca_file, "CA");
    if (!ca.ok()) return ca.status();
    ssl.pem_root_certs = *ca;
  }
  if (!tls.cert_file.empty()) {
    absl::StatusOr<std::string> cert = ReadPem(tls.cert_file, "client certificate");
    if (!cert.ok()) return cert.status();
    absl::StatusOr<std::string> key = ReadPem(tls.key_file, "client key");
    if (!key.ok()) return key.status();
    ssl.pem_cert_chain = *cert;
    ssl.pem_private_key = *key;
  }
  grpc::ChannelArguments args = DefaultChannelArguments();
  if (!tls.server_name.empty()) args.SetSslTargetNameOverride(tls.server_name);
  auto connect = [credentials = grpc::SslCredentials(ssl), args](const std::string& address) {
    return grpc::CreateCustomChannel(address, credentials, args);
  };
  return std::make_unique<BloomClient>(connect(target), std::move(options), connect);
}

BloomClient::BloomClient(std::shared_ptr<grpc::Channel> channel, ClientOptions options,
                         ShardRoutes::Connect connect)
    : channel_(channel),
      stub_(bloom::v1::BloomFilterService::NewStub(std::move(channel))),
      options_(std::move(options)),
      reconnect_poller_(std::make_unique<ReconnectPoller>(channel_)) {
  const Coalescer::Options coalescing{.streams = options_.pipeline_streams,
                                      .rounds = options_.pipeline_rounds,
                                      .max_items = options_.batch_size,
                                      .timeout = options_.timeout,
                                      .token = options_.token,
                                      .last_sequence = &last_sequence_};
  if (options_.pipelined) coalescer_ = std::make_unique<Coalescer>(stub_.get(), coalescing);
  if (options_.shard_routing && connect != nullptr) {
    routes_ = std::make_unique<ShardRoutes>(
        stub_.get(), std::move(connect), [this](grpc::ClientContext& context) { Prepare(context); },
        options_.pipelined ? absl::make_optional(coalescing) : absl::nullopt);
    // Without the map now (the pod is not up yet), calls go through the pod named, which
    // forwards them, and the first forwarded answer fetches it.
    routes_->Refresh().IgnoreError();
  }
}

BloomClient::~BloomClient() = default;

absl::Status BloomClient::Finished(const grpc::Status& status,
                                   const grpc::ClientContext* context) const {
  if (status.error_code() == grpc::StatusCode::UNAVAILABLE) reconnect_poller_->Wake();
  if (routes_ != nullptr && context != nullptr) routes_->AfterCall(*context, status);
  return FromGrpcStatus(status);
}

absl::StatusOr<std::vector<bool>> BloomClient::Coalesced(
    absl::StatusOr<std::vector<bool>> answers) const {
  if (absl::IsUnavailable(answers.status())) reconnect_poller_->Wake();
  if (routes_ != nullptr && !answers.ok()) routes_->AfterError(answers.status());
  return answers;
}

std::shared_ptr<ShardRoutes::Group> BloomClient::Route(absl::string_view name) const {
  return routes_ == nullptr ? nullptr : routes_->For(name);
}

bloom::v1::BloomFilterService::Stub* BloomClient::StubFor(
    const std::shared_ptr<ShardRoutes::Group>& group) const {
  return group != nullptr ? group->stub.get() : stub_.get();
}

Coalescer* BloomClient::CoalescerFor(const std::shared_ptr<ShardRoutes::Group>& group) const {
  return group != nullptr && group->coalescer != nullptr ? group->coalescer.get()
                                                         : coalescer_.get();
}

uint64_t BloomClient::shard_map_version() const {
  return routes_ == nullptr ? 0 : routes_->version();
}

bool BloomClient::Coalesces(absl::Span<const std::string> items) const {
  return coalescer_ != nullptr && !items.empty() && items.size() <= options_.batch_size;
}

absl::StatusOr<bool> BloomClient::Serving() {
  // grpc.health.v1.Health/Check by hand (Debian ships no generated health stubs): the request
  // HealthCheckRequest{service: ""} is empty; the answer's field 1 is the status, 1 = SERVING.
  grpc::GenericStub generic(channel_);
  grpc::ClientContext context;
  Prepare(context);
  grpc::Slice empty;
  grpc::ByteBuffer request(&empty, 1), response;
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  grpc::Status status;
  generic.UnaryCall(&context, "/grpc.health.v1.Health/Check", grpc::StubOptions(), &request,
                    &response, [&](grpc::Status s) {
                      std::lock_guard<std::mutex> lock(mu);
                      status = std::move(s);
                      done = true;
                      cv.notify_one();
                    });
  std::unique_lock<std::mutex> lock(mu);
  cv.wait(lock, [&] { return done; });
  if (!status.ok()) return Finished(status);
  std::vector<grpc::Slice> slices;
  if (!response.Dump(&slices).ok()) return absl::InternalError("unreadable health response");
  std::string bytes;
  for (const grpc::Slice& slice : slices) {
    bytes.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
  }
  return bytes == std::string("\x08\x01", 2);
}

void BloomClient::Prepare(grpc::ClientContext& context, bool deadline) const {
  if (deadline) {
    context.set_deadline(std::chrono::system_clock::now() +
                         absl::ToChronoNanoseconds(options_.timeout));
  }
  if (!options_.token.empty()) context.AddMetadata("authorization", "Bearer " + options_.token);
  for (const auto& [key, value] : options_.metadata) context.AddMetadata(key, value);
}

absl::StatusOr<bloom::v1::ReserveResponse> BloomClient::Reserve(absl::string_view name,
                                                                const bloom::v1::FilterSpec& spec) {
  bloom::v1::ReserveRequest request;
  request.set_name(static_cast<std::string>(name));
  *request.mutable_spec() = spec;
  return SendReserve(request);
}

absl::StatusOr<bloom::v1::ReserveResponse> BloomClient::ReserveLike(absl::string_view name,
                                                                    absl::string_view like) {
  bloom::v1::ReserveRequest request;
  request.set_name(static_cast<std::string>(name));
  request.set_like(static_cast<std::string>(like));
  return SendReserve(request);
}

absl::StatusOr<bloom::v1::ReserveResponse> BloomClient::SendReserve(
    const bloom::v1::ReserveRequest& request) {
  const std::shared_ptr<ShardRoutes::Group> group = Route(request.name());
  grpc::ClientContext context;
  Prepare(context);
  bloom::v1::ReserveResponse response;
  absl::Status status = Finished(StubFor(group)->Reserve(&context, request, &response), &context);
  if (!status.ok()) return status;
  ObserveSequence(response.sequence());
  return response;
}

absl::StatusOr<bloom::v1::FilterStats> BloomClient::Merge(absl::string_view target,
                                                          absl::Span<const std::string> sources) {
  const std::shared_ptr<ShardRoutes::Group> group = Route(target);
  grpc::ClientContext context;
  Prepare(context);
  bloom::v1::MergeRequest request;
  request.set_target(static_cast<std::string>(target));
  for (const std::string& source : sources) request.add_sources(source);
  bloom::v1::MergeResponse response;
  absl::Status status = Finished(StubFor(group)->Merge(&context, request, &response), &context);
  if (!status.ok()) return status;
  ObserveSequence(response.sequence());
  return std::move(*response.mutable_stats());
}

absl::StatusOr<std::vector<bool>> BloomClient::Batched(
    absl::Span<const std::string> items,
    const std::function<absl::Status(absl::Span<const std::string>, std::vector<bool>&)>& call) {
  std::vector<bool> results;
  results.reserve(items.size());
  const size_t batch = std::max<size_t>(1, options_.batch_size);
  for (size_t begin = 0; begin < items.size() || begin == 0; begin += batch) {
    absl::Status status = call(items.subspan(begin, batch), results);
    if (!status.ok()) return status;
    if (items.empty()) break;  // one request, so the server can answer INVALID_ARGUMENT
  }
  return results;
}

absl::StatusOr<std::vector<bool>> BloomClient::Add(absl::string_view name,
                                                   absl::Span<const std::string> items,
                                                   const bloom::v1::FilterSpec* create_if_missing) {
  const std::shared_ptr<ShardRoutes::Group> group = Route(name);
  if (Coalesces(items)) return Coalesced(CoalescerFor(group)->Add(name, items, create_if_missing));
  return Batched(items, [&](absl::Span<const std::string> batch, std::vector<bool>& out) {
    grpc::ClientContext context;
    Prepare(context);
    bloom::v1::AddRequest request;
    request.set_name(static_cast<std::string>(name));
    request.mutable_raw_items()->Add(batch.begin(), batch.end());  // bytes: any item
    if (create_if_missing != nullptr) *request.mutable_create_if_missing() = *create_if_missing;
    bloom::v1::AddResponse response;
    absl::Status status = Finished(StubFor(group)->Add(&context, request, &response), &context);
    if (status.ok()) {
      out.insert(out.end(), response.added().begin(), response.added().end());
      ObserveSequence(response.sequence());
    }
    return status;
  });
}

absl::StatusOr<std::vector<bool>> BloomClient::AddIntegers(
    absl::string_view name, absl::Span<const int64_t> values,
    const bloom::v1::FilterSpec* create_if_missing) {
  return Add(name, Decimal(values), create_if_missing);
}

absl::StatusOr<std::vector<bool>> BloomClient::MightContain(absl::string_view name,
                                                            absl::Span<const std::string> items,
                                                            bool absent_if_missing) {
  const std::shared_ptr<ShardRoutes::Group> group = Route(name);
  if (Coalesces(items)) {
    return Coalesced(CoalescerFor(group)->MightContain(name, items, absent_if_missing));
  }
  return Batched(items, [&](absl::Span<const std::string> batch, std::vector<bool>& out) {
    grpc::ClientContext context;
    Prepare(context);
    bloom::v1::MightContainRequest request;
    request.set_name(static_cast<std::string>(name));
    request.mutable_raw_items()->Add(batch.begin(), batch.end());  // bytes: any item
    request.set_absent_if_missing(absent_if_missing);
    request.set_min_sequence(last_sequence());
    bloom::v1::MightContainResponse response;
    absl::Status status =
        Finished(StubFor(group)->MightContain(&context, request, &response), &context);
    if (status.ok()) out.insert(out.end(), response.present().begin(), response.present().end());
    return status;
  });
}

absl::StatusOr<std::vector<bool>> BloomClient::MightContainIntegers(
    absl::string_view name, absl::Span<const int64_t> values) {
  return MightContain(name, Decimal(values));
}

absl::StatusOr<std::vector<bool>> BloomClient::Remove(absl::string_view name,
                                                      absl::Span<const std::string> items) {
  const std::shared_ptr<ShardRoutes::Group> group = Route(name);
  if (Coalesces(items)) return Coalesced(CoalescerFor(group)->Remove(name, items));
  return Batched(items, [&](absl::Span<const std::string> batch, std::vector<bool>& out) {
    grpc::ClientContext context;
    Prepare(context);
    bloom::v1::RemoveRequest request;
    request.set_name(static_cast<std::string>(name));
    request.mutable_raw_items()->Add(batch.begin(), batch.end());
    bloom::v1::RemoveResponse response;
    absl::Status status = Finished(StubFor(group)->Remove(&context, request, &response), &context);
    if (!status.ok()) return status;
    ObserveSequence(response.sequence());
    out.insert(out.end(), response.removed().begin(), response.removed().end());
    return status;
  });
}

absl::StatusOr<std::vector<uint32_t>> BloomClient::Count(absl::string_view name,
                                                         absl::Span<const std::string> items) {
  const std::shared_ptr<ShardRoutes::Group> group = Route(name);
  if (Coalesces(items)) {
    absl::StatusOr<absl::optional<std::vector<uint32_t>>> pipelined =
        CoalescerFor(group)->Count(name, items);
    if (absl::IsUnavailable(pipelined.status())) reconnect_poller_->Wake();
    if (!pipelined.ok()) {
      if (routes_ != nullptr) routes_->AfterError(pipelined.status());
      return pipelined.status();
    }
    if (pipelined->has_value()) return **std::move(pipelined);
    // This stream's server has not said it takes counts yet: unary.
  }
  std::vector<uint32_t> counts;
  counts.reserve(items.size());
  const size_t batch = std::max<size_t>(1, options_.batch_size);
  for (size_t begin = 0; begin < items.size() || begin == 0; begin += batch) {
    grpc::ClientContext context;
    Prepare(context);
    bloom::v1::CountRequest request;
    request.set_name(static_cast<std::string>(name));
    for (const std::string& item : items.subspan(begin, batch)) request.add_raw_items(item);
    request.set_min_sequence(last_sequence());
    bloom::v1::CountResponse response;
    absl::Status status = Finished(StubFor(group)->Count(&context, request, &response), &context);
    if (!status.ok()) return status;
    counts.insert(counts.end(), response.counts().begin(), response.counts().end());
    if (items.empty()) break;  // one request, so the server can answer INVALID_ARGUMENT
  }
  return counts;
}

absl::StatusOr<bloom::v1::FilterStats> BloomClient::Stats(absl::string_view name) {
  const std::shared_ptr<ShardRoutes::Group> group = Route(name);
  grpc::ClientContext context;
  Prepare(context);
  bloom::v1::StatsRequest request;
  request.set_name(static_cast<std::string>(name));
  request.set_min_sequence(last_sequence());
  bloom::v1::StatsResponse response;
  absl::Status status = Finished(StubFor(group)->Stats(&context, request, &response), &context);
  if (!status.ok()) return status;
  return response.stats();
}

absl::Status BloomClient::Delete(absl::string_view name) {
  const std::shared_ptr<ShardRoutes::Group> group = Route(name);
  grpc::ClientContext context;
  Prepare(context);
  bloom::v1::DeleteRequest request;
  request.set_name(static_cast<std::string>(name));
  bloom::v1::DeleteResponse response;
  absl::Status status = Finished(StubFor(group)->Delete(&context, request, &response), &context);
  if (status.ok()) ObserveSequence(response.sequence());
  return status;
}

absl::StatusOr<bloom::v1::ListResponse> BloomClient::List(absl::string_view prefix,
                                                          uint32_t page_size,
                                                          absl::string_view page_token) {
  grpc::ClientContext context;
  Prepare(context);
  bloom::v1::ListRequest request;
  request.set_prefix(static_cast<std::string>(prefix));
  request.set_page_size(page_size);
  request.set_page_token(static_cast<std::string>(page_token));
  request.set_min_sequence(last_sequence());
  bloom::v1::ListResponse response;
  absl::Status status = Finished(stub_->List(&context, request, &response));
  if (!status.ok()) return status;
  return response;
}

absl::Status BloomClient::Export(absl::string_view name, std::ostream& out) {
  const std::shared_ptr<ShardRoutes::Group> group = Route(name);
  grpc::ClientContext context;
  // Dumps can be large: no fixed deadline, but the server stops if we go away.
  Prepare(context, /*deadline=*/false);
  bloom::v1::ExportRequest request;
  request.set_name(static_cast<std::string>(name));
  request.set_min_sequence(last_sequence());
  std::unique_ptr<grpc::ClientReader<bloom::v1::ExportChunk>> reader =
      StubFor(group)->Export(&context, request);
  bloom::v1::ExportChunk chunk;
  while (reader->Read(&chunk)) {
    out.write(chunk.data().data(), static_cast<std::streamsize>(chunk.data().size()));
    if (!out) {
      context.TryCancel();
      reader->Finish().ok();  // drain: the write error is what the caller needs to hear
      return absl::UnavailableError("cannot write the export output");
    }
  }
  return Finished(reader->Finish(), &context);
}

absl::StatusOr<bloom::v1::FilterStats> BloomClient::Import(absl::string_view name, std::istream& in,
                                                           bool merge_into_existing) {
  const std::shared_ptr<ShardRoutes::Group> group = Route(name);
  grpc::ClientContext context;
  Prepare(context, /*deadline=*/false);
  bloom::v1::ImportResponse response;
  std::unique_ptr<grpc::ClientWriter<bloom::v1::ImportChunk>> writer =
      StubFor(group)->Import(&context, &response);
  bloom::v1::ImportChunk chunk;
  chunk.set_name(static_cast<std::string>(name));
  chunk.set_merge_into_existing(merge_into_existing);
  std::string buffer(1 << 20, '\0');
  bool first = true;
  while (true) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    const std::streamsize got = in.gcount();
    if (got == 0 && !first) break;
    chunk.set_data(buffer.data(), static_cast<size_t>(got));
    if (!writer->Write(chunk)) break;  // the server ended the call: Finish() says why
    chunk.clear_name();
    chunk.clear_merge_into_existing();
    first = false;
    if (got == 0) break;
  }
  writer->WritesDone();
  absl::Status status = Finished(writer->Finish(), &context);
  if (!status.ok()) return status;
  ObserveSequence(response.sequence());
  return response.stats();
}

}  // namespace bloomclient
