// EtcdClient (etcd_client.h): etcd's v3 KV, Lease and Watch calls.
#include "coordination/etcd_client.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace coordination {
namespace {

namespace pb = etcdserverpb;

KeyValue FromProto(const mvccpb::KeyValue& kv) {
  return KeyValue{kv.key(), kv.value(), kv.create_revision(), kv.mod_revision(), kv.lease()};
}

// The end of the range of every key starting with `prefix`: the prefix with its last byte
// that is not 0xff incremented (and what follows it dropped). "\0" (every key) if there is
// none, as etcd defines it.
std::string PrefixEnd(const std::string& prefix) {
  std::string end = prefix;
  while (!end.empty()) {
    if (static_cast<unsigned char>(end.back()) != 0xff) {
      end.back() = static_cast<char>(static_cast<unsigned char>(end.back()) + 1);
      return end;
    }
    end.pop_back();
  }
  end.push_back('\0');
  return end;
}

pb::RequestOp PutOp(const std::string& key, const std::string& value, int64_t lease) {
  pb::RequestOp op;
  pb::PutRequest* put = op.mutable_request_put();
  put->set_key(key);
  put->set_value(value);
  put->set_lease(lease);
  return op;
}

}  // namespace

absl::StatusOr<std::unique_ptr<EtcdClient>> EtcdClient::Connect(std::vector<std::string> endpoints,
                                                                absl::Duration call_timeout) {
  if (endpoints.empty()) return absl::InvalidArgumentError("no etcd endpoints");
  std::vector<Endpoint> connected;
  for (std::string& address : endpoints) {
    if (address.empty()) return absl::InvalidArgumentError("an empty etcd endpoint");
    Endpoint endpoint;
    endpoint.address = std::move(address);
    grpc::ChannelArguments args;
    // A member that went away is noticed within seconds, not after TCP's own timeouts.
    args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 2000);
    args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 2000);
    args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
    endpoint.channel =
        grpc::CreateCustomChannel(endpoint.address, grpc::InsecureChannelCredentials(), args);
    endpoint.kv = pb::KV::NewStub(endpoint.channel);
    endpoint.lease = pb::Lease::NewStub(endpoint.channel);
    endpoint.watch = pb::Watch::NewStub(endpoint.channel);
    connected.push_back(std::move(endpoint));
  }
  return std::unique_ptr<EtcdClient>(new EtcdClient(std::move(connected), call_timeout));
}

EtcdClient::EtcdClient(std::vector<Endpoint> endpoints, absl::Duration call_timeout)
    : endpoints_(std::move(endpoints)), call_timeout_(call_timeout) {}

const EtcdClient::Endpoint& EtcdClient::Current() const {
  return endpoints_[current_.load() % endpoints_.size()];
}

std::string EtcdClient::current_endpoint() const { return Current().address; }

void EtcdClient::Deadline(grpc::ClientContext& context) const {
  context.set_deadline(absl::ToChronoTime(absl::Now() + call_timeout_));
}

absl::Status EtcdClient::Checked(const Endpoint& endpoint, const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  const grpc::StatusCode code = status.error_code();
  if (code == grpc::StatusCode::UNAVAILABLE || code == grpc::StatusCode::DEADLINE_EXCEEDED) {
    // The next call tries the next member, unless another call moved on already.
    size_t seen = current_.load();
    if (&endpoints_[seen % endpoints_.size()] == &endpoint) {
      current_.compare_exchange_strong(seen, seen + 1);
    }
  }
  return {static_cast<absl::StatusCode>(code),
          absl::StrCat("etcd ", endpoint.address, ": ", status.error_message())};
}

absl::StatusOr<EtcdLease> EtcdClient::GrantLease(absl::Duration ttl) {
  const int64_t seconds = absl::ToInt64Seconds(ttl);
  if (seconds < 1) return absl::InvalidArgumentError("an etcd lease lasts at least 1s");
  const Endpoint& endpoint = Current();
  grpc::ClientContext context;
  Deadline(context);
  pb::LeaseGrantRequest request;
  request.set_ttl(seconds);
  pb::LeaseGrantResponse response;
  absl::Status status = Checked(endpoint, endpoint.lease->LeaseGrant(&context, request, &response));
  if (!status.ok()) return status;
  if (!response.error().empty()) {
    return absl::UnavailableError(absl::StrCat("etcd ", endpoint.address, ": ", response.error()));
  }
  return EtcdLease{response.id(), absl::Seconds(response.ttl())};
}

absl::StatusOr<absl::Duration> EtcdClient::KeepAliveOnce(int64_t lease) {
  const Endpoint& endpoint = Current();
  grpc::ClientContext context;
  Deadline(context);
  auto stream = endpoint.lease->LeaseKeepAlive(&context);
  pb::LeaseKeepAliveRequest request;
  request.set_id(lease);
  pb::LeaseKeepAliveResponse response;
  const bool exchanged = stream->Write(request) && stream->Read(&response);
  stream->WritesDone();
  if (!exchanged) {
    // The stream is over (a failed Write or Read says so): its status says why.
    absl::Status status = Checked(endpoint, stream->Finish());
    if (status.ok()) status = absl::UnavailableError("etcd ended the keep-alive stream");
    return status;
  }
  context.TryCancel();    // one exchange is all this call wants
  stream->Finish().ok();  // the cancellation's own status says nothing
  if (response.ttl() <= 0) {
    return absl::NotFoundError(absl::StrCat("etcd lease ", lease, " has expired"));
  }
  return absl::Seconds(response.ttl());
}

absl::Status EtcdClient::RevokeLease(int64_t lease) {
  const Endpoint& endpoint = Current();
  grpc::ClientContext context;
  Deadline(context);
  pb::LeaseRevokeRequest request;
  request.set_id(lease);
  pb::LeaseRevokeResponse response;
  absl::Status status =
      Checked(endpoint, endpoint.lease->LeaseRevoke(&context, request, &response));
  if (absl::IsNotFound(status)) return absl::OkStatus();  // "requested lease not found"
  return status;
}

absl::StatusOr<KeyValue> EtcdClient::Get(const std::string& key, int64_t* revision) {
  const Endpoint& endpoint = Current();
  grpc::ClientContext context;
  Deadline(context);
  pb::RangeRequest request;
  request.set_key(key);
  pb::RangeResponse response;
  absl::Status status = Checked(endpoint, endpoint.kv->Range(&context, request, &response));
  if (!status.ok()) return status;
  if (revision != nullptr) *revision = response.header().revision();
  if (response.kvs_size() == 0) return absl::NotFoundError(absl::StrCat("no etcd key ", key));
  return FromProto(response.kvs(0));
}

absl::StatusOr<std::vector<KeyValue>> EtcdClient::GetPrefix(const std::string& prefix,
                                                            int64_t* revision) {
  const Endpoint& endpoint = Current();
  grpc::ClientContext context;
  Deadline(context);
  pb::RangeRequest request;
  request.set_key(prefix);
  request.set_range_end(PrefixEnd(prefix));
  pb::RangeResponse response;
  absl::Status status = Checked(endpoint, endpoint.kv->Range(&context, request, &response));
  if (!status.ok()) return status;
  if (revision != nullptr) *revision = response.header().revision();
  std::vector<KeyValue> out;
  out.reserve(response.kvs_size());
  for (const mvccpb::KeyValue& kv : response.kvs()) out.push_back(FromProto(kv));
  return out;
}

absl::StatusOr<int64_t> EtcdClient::Put(const std::string& key, const std::string& value,
                                        int64_t lease) {
  const Endpoint& endpoint = Current();
  grpc::ClientContext context;
  Deadline(context);
  pb::PutRequest request;
  request.set_key(key);
  request.set_value(value);
  request.set_lease(lease);
  pb::PutResponse response;
  absl::Status status = Checked(endpoint, endpoint.kv->Put(&context, request, &response));
  if (!status.ok()) return status;
  return response.header().revision();
}

absl::StatusOr<pb::TxnResponse> EtcdClient::Txn(const pb::TxnRequest& request) {
  const Endpoint& endpoint = Current();
  grpc::ClientContext context;
  Deadline(context);
  pb::TxnResponse response;
  absl::Status status = Checked(endpoint, endpoint.kv->Txn(&context, request, &response));
  if (!status.ok()) return status;
  return response;
}

absl::StatusOr<bool> EtcdClient::CreateIfAbsent(const std::string& key, const std::string& value,
                                                int64_t lease) {
  return PutIfModRevision(key, value, /*mod_revision=*/0, lease);
}

absl::StatusOr<bool> EtcdClient::PutIfModRevision(const std::string& key, const std::string& value,
                                                  int64_t mod_revision, int64_t lease) {
  // A mod_revision of 0 is that of a key that does not exist.
  absl::StatusOr<int64_t> committed =
      Commit({Condition{key, Condition::Kind::kModifiedAt, mod_revision, ""}},
             {Write{key, value, lease, false}});
  if (!committed.ok()) return committed.status();
  return *committed != 0;
}

absl::StatusOr<bool> EtcdClient::PutIfKeyCreatedAt(const std::string& guard_key,
                                                   int64_t create_revision, const std::string& key,
                                                   const std::string& value) {
  if (create_revision <= 0) return absl::InvalidArgumentError("a guard's revision is positive");
  absl::StatusOr<int64_t> committed =
      Commit({Condition{guard_key, Condition::Kind::kCreatedAt, create_revision, ""}},
             {Write{key, value, 0, false}});
  if (!committed.ok()) return committed.status();
  return *committed != 0;
}

absl::StatusOr<int64_t> EtcdClient::CreateAndDelete(const std::string& key,
                                                    const std::string& value, int64_t lease,
                                                    const std::string& other_key,
                                                    int64_t other_created_at) {
  if (other_created_at <= 0) return absl::InvalidArgumentError("a guard's revision is positive");
  // One transaction is one revision: the put's, hence the key's create_revision.
  return Commit({Condition{key, Condition::Kind::kAbsent, 0, ""},
                 Condition{other_key, Condition::Kind::kCreatedAt, other_created_at, ""}},
                {Write{key, value, lease, false}, Write{other_key, "", 0, true}});
}

absl::StatusOr<int64_t> EtcdClient::Commit(const std::vector<Condition>& conditions,
                                           const std::vector<Write>& writes) {
  pb::TxnRequest request;
  for (const Condition& condition : conditions) {
    pb::Compare* compare = request.add_compare();
    compare->set_key(condition.key);
    compare->set_result(pb::Compare::EQUAL);
    switch (condition.kind) {
      case Condition::Kind::kAbsent:
        compare->set_target(pb::Compare::CREATE);
        compare->set_create_revision(0);
        break;
      case Condition::Kind::kCreatedAt:
        compare->set_target(pb::Compare::CREATE);
        compare->set_create_revision(condition.revision);
        break;
      case Condition::Kind::kModifiedAt:
        compare->set_target(pb::Compare::MOD);
        compare->set_mod_revision(condition.revision);
        break;
      case Condition::Kind::kValueIs:
        compare->set_target(pb::Compare::VALUE);
        compare->set_value(condition.value);
        break;
    }
  }
  for (const Write& write : writes) {
    if (write.erase) {
      request.add_success()->mutable_request_delete_range()->set_key(write.key);
    } else {
      *request.add_success() = PutOp(write.key, write.value, write.lease);
    }
  }
  absl::StatusOr<pb::TxnResponse> response = Txn(request);
  if (!response.ok()) return response.status();
  return response->succeeded() ? response->header().revision() : 0;
}

absl::StatusOr<bool> EtcdClient::DeleteIfValue(const std::string& key, const std::string& value) {
  absl::StatusOr<int64_t> committed =
      Commit({Condition{key, Condition::Kind::kValueIs, 0, value}}, {Write{key, "", 0, true}});
  if (!committed.ok()) return committed.status();
  return *committed != 0;
}

absl::StatusOr<std::unique_ptr<EtcdWatch>> EtcdClient::Watch(const std::string& key, bool prefix,
                                                             int64_t start_revision) {
  const Endpoint& endpoint = Current();
  std::unique_ptr<EtcdWatch> watch(new EtcdWatch());
  watch->endpoint_ = endpoint.address;
  // No deadline: a watch lasts. gRPC's keep-alive (Connect) notices a member that went away.
  watch->stream_ = endpoint.watch->Watch(&watch->context_);
  pb::WatchRequest request;
  pb::WatchCreateRequest* create = request.mutable_create_request();
  create->set_key(key);
  if (prefix) create->set_range_end(PrefixEnd(key));
  create->set_start_revision(start_revision);
  pb::WatchResponse created;
  if (!watch->stream_->Write(request) || !watch->stream_->Read(&created)) {
    // The stream is over (a failed Write or Read says so): its status says why.
    absl::Status status = Checked(endpoint, watch->stream_->Finish());
    // Finished: ~EtcdWatch must not finish it again (gRPC aborts on a second Finish).
    watch->stream_.reset();
    if (status.ok()) status = absl::UnavailableError("etcd ended the watch stream");
    return status;
  }
  if (!created.created() || created.canceled()) {
    if (created.compact_revision() != 0) {
      return absl::OutOfRangeError(absl::StrCat("etcd ", endpoint.address, ": revision ",
                                                start_revision, " was compacted (now ",
                                                created.compact_revision(), ")"));
    }
    return absl::FailedPreconditionError(
        absl::StrCat("etcd ", endpoint.address, " refused the watch: ", created.cancel_reason()));
  }
  return watch;
}

EtcdWatch::~EtcdWatch() {
  if (stream_ == nullptr) return;
  context_.TryCancel();
  stream_->Finish().ok();  // cancelled on purpose: its status says nothing
}

void EtcdWatch::Cancel() { context_.TryCancel(); }

absl::StatusOr<std::vector<WatchEvent>> EtcdWatch::Next() {
  pb::WatchResponse response;
  while (stream_->Read(&response)) {
    if (response.canceled()) {
      if (response.compact_revision() != 0) {
        return absl::OutOfRangeError(absl::StrCat("etcd ", endpoint_, ": watched revision was ",
                                                  "compacted (now ", response.compact_revision(),
                                                  ")"));
      }
      return absl::UnavailableError(
          absl::StrCat("etcd ", endpoint_, " cancelled the watch: ", response.cancel_reason()));
    }
    if (response.events_size() == 0) continue;  // progress notifications
    std::vector<WatchEvent> events;
    events.reserve(response.events_size());
    for (const mvccpb::Event& event : response.events()) {
      WatchEvent out;
      out.type = event.type() == mvccpb::Event::DELETE ? WatchEvent::Type::kDelete
                                                       : WatchEvent::Type::kPut;
      out.kv = FromProto(event.kv());
      events.push_back(std::move(out));
    }
    return events;
  }
  grpc::Status status = stream_->Finish();
  stream_.reset();
  if (status.error_code() == grpc::StatusCode::CANCELLED) {
    return absl::CancelledError("the watch was cancelled");
  }
  return absl::UnavailableError(
      absl::StrCat("etcd ", endpoint_, " ended the watch: ", status.error_message()));
}

}  // namespace coordination
