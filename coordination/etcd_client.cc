// EtcdClient (etcd_client.h): etcd's v3 KV, Lease and Watch calls.
#include "coordination/etcd_client.h"

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace coordination {
namespace {

namespace pb = etcdserverpb;

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

// A failure to reach the member (or to hear from it in time): the next member may answer.
bool IsTransportFailure(const grpc::Status& status) {
  return status.error_code() == grpc::StatusCode::UNAVAILABLE ||
         status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
}

// etcd refused the call's auth token, not the call: the token expired (etcd's
// --auth-token-ttl), the member restarted and forgot it, or the auth store changed after it
// was issued. A fresh token may be accepted.
bool TokenRefused(const grpc::Status& status) {
  const std::string& message = status.error_message();
  return status.error_code() == grpc::StatusCode::UNAUTHENTICATED ||
         absl::StrContains(message, "invalid auth token") ||
         absl::StrContains(message, "revision of auth store is old") ||
         absl::StrContains(message, "user name is empty");
}

}  // namespace

absl::StatusOr<std::unique_ptr<EtcdClient>> EtcdClient::Connect(std::vector<std::string> endpoints,
                                                                absl::Duration call_timeout,
                                                                EtcdSecurity security) {
  if (endpoints.empty()) return absl::InvalidArgumentError("no etcd endpoints");
  for (const std::string& address : endpoints) {
    if (address.empty()) return absl::InvalidArgumentError("an empty etcd endpoint");
  }
  if (absl::Status checked = CheckEtcdSecurity(security); !checked.ok()) return checked;
  absl::StatusOr<EtcdTlsFiles> files = ReadEtcdTlsFiles(security);
  if (!files.ok()) return files.status();
  std::shared_ptr<const Channels> channels = MakeChannels(endpoints, *std::move(files));
  return std::unique_ptr<EtcdClient>(
      new EtcdClient(std::move(endpoints), std::move(channels), call_timeout, std::move(security)));
}

std::shared_ptr<const EtcdClient::Channels> EtcdClient::MakeChannels(
    const std::vector<std::string>& addresses, EtcdTlsFiles files) {
  auto channels = std::make_shared<Channels>();
  const std::shared_ptr<grpc::ChannelCredentials> credentials = EtcdChannelCredentials(files);
  channels->files = std::move(files);
  for (const std::string& address : addresses) {
    Endpoint endpoint;
    endpoint.address = address;
    endpoint.index = channels->endpoints.size();
    grpc::ChannelArguments args;
    // A member that went away is noticed within seconds, not after TCP's own timeouts.
    args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 2000);
    args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 2000);
    args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
    endpoint.channel = grpc::CreateCustomChannel(address, credentials, args);
    endpoint.kv = pb::KV::NewStub(endpoint.channel);
    endpoint.lease = pb::Lease::NewStub(endpoint.channel);
    endpoint.watch = pb::Watch::NewStub(endpoint.channel);
    endpoint.auth = pb::Auth::NewStub(endpoint.channel);
    channels->endpoints.push_back(std::move(endpoint));
  }
  return channels;
}

EtcdClient::EtcdClient(std::vector<std::string> addresses, std::shared_ptr<const Channels> channels,
                       absl::Duration call_timeout, EtcdSecurity security)
    : addresses_(std::move(addresses)),
      call_timeout_(call_timeout),
      security_(std::move(security)) {
  bloomsync::MutexLock lock(&mu_);  // not yet shared: taken for the analysis
  channels_ = std::move(channels);
  next_file_check_ = absl::Now() + security_.reload_interval;
}

EtcdClient::Target EtcdClient::Current() {
  std::shared_ptr<const Channels> channels;
  bool check_files = false;
  {
    bloomsync::MutexLock lock(&mu_);
    channels = channels_;
    const absl::Time now = absl::Now();
    if (security_.tls() && now >= next_file_check_) {
      next_file_check_ = now + security_.reload_interval;
      check_files = true;
    }
  }
  if (check_files) {
    // Files that do not read now (a Secret being swapped) are read again next time.
    absl::StatusOr<EtcdTlsFiles> files = ReadEtcdTlsFiles(security_);
    if (files.ok() && !(*files == channels->files)) {
      std::shared_ptr<const Channels> fresh = MakeChannels(addresses_, *std::move(files));
      bloomsync::MutexLock lock(&mu_);
      channels_ = fresh;
      channels = std::move(fresh);
    }
  }
  const Endpoint* endpoint = &channels->endpoints[current_.load() % channels->endpoints.size()];
  return Target{std::move(channels), endpoint};
}

std::string EtcdClient::current_endpoint() { return Current().endpoint->address; }

absl::StatusOr<std::string> EtcdClient::Token(const Endpoint& endpoint) {
  {
    bloomsync::MutexLock lock(&mu_);
    if (!token_.empty()) return token_;
  }
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + call_timeout_));
  pb::AuthenticateRequest request;
  request.set_name(security_.username);
  request.set_password(security_.password);
  pb::AuthenticateResponse response;
  const grpc::Status status = endpoint.auth->Authenticate(&context, request, &response);
  if (!status.ok()) {
    absl::Status checked = Checked(endpoint, status, "");
    if (IsTransportFailure(status)) return checked;
    // etcd says "authentication failed, invalid user ID or password" (INVALID_ARGUMENT), or
    // that its auth is not enabled: either way the settings are wrong, not the network.
    return absl::UnauthenticatedError(
        absl::StrCat("etcd ", endpoint.address, " refused to authenticate user \"",
                     security_.username, "\": ", status.error_message()));
  }
  bloomsync::MutexLock lock(&mu_);
  token_ = response.token();
  return token_;
}

absl::Status EtcdClient::Prepare(const Endpoint& endpoint, grpc::ClientContext& context,
                                 bool deadline, std::string& token) {
  if (deadline) context.set_deadline(absl::ToChronoTime(absl::Now() + call_timeout_));
  token.clear();
  if (!security_.authenticates()) return absl::OkStatus();
  absl::StatusOr<std::string> fetched = Token(endpoint);
  if (!fetched.ok()) return fetched.status();
  token = *std::move(fetched);
  context.AddMetadata("token", token);  // etcd's name for it (clientv3 sends the same)
  return absl::OkStatus();
}

absl::Status EtcdClient::Checked(const Endpoint& endpoint, const grpc::Status& status,
                                 const std::string& token) {
  if (status.ok()) return absl::OkStatus();
  const grpc::StatusCode code = status.error_code();
  if (IsTransportFailure(status)) {
    // The next call tries the next member, unless another call moved on already.
    size_t seen = current_.load();
    if (seen % addresses_.size() == endpoint.index) {
      current_.compare_exchange_strong(seen, seen + 1);
    }
  }
  if (!token.empty() && TokenRefused(status)) {
    bloomsync::MutexLock lock(&mu_);
    if (token_ == token) token_.clear();  // the next call fetches a new one
  }
  return {static_cast<absl::StatusCode>(code),
          absl::StrCat("etcd ", endpoint.address, ": ", status.error_message())};
}

absl::Status EtcdClient::Begin(Call& call) {
  call.target = Current();
  return Prepare(call.endpoint(), call.context, /*deadline=*/true, call.token);
}

template <typename Rpc>
absl::Status EtcdClient::Unary(Rpc rpc) {
  for (int attempt = 0;; ++attempt) {
    Call call;
    if (absl::Status begun = Begin(call); !begun.ok()) return begun;
    const grpc::Status status = rpc(call.endpoint(), call.context);
    absl::Status checked = Checked(call.endpoint(), status, call.token);
    // etcd refused the token before doing anything, so the call can be made again.
    if (attempt == 0 && !call.token.empty() && TokenRefused(status)) continue;
    return checked;
  }
}

absl::StatusOr<EtcdLease> EtcdClient::GrantLease(absl::Duration ttl) {
  const int64_t seconds = absl::ToInt64Seconds(ttl);
  if (seconds < 1) return absl::InvalidArgumentError("an etcd lease lasts at least 1s");
  pb::LeaseGrantRequest request;
  request.set_ttl(seconds);
  pb::LeaseGrantResponse response;
  std::string address;
  absl::Status status = Unary([&](const Endpoint& endpoint, grpc::ClientContext& context) {
    address = endpoint.address;
    return endpoint.lease->LeaseGrant(&context, request, &response);
  });
  if (!status.ok()) return status;
  if (!response.error().empty()) {
    return absl::UnavailableError(absl::StrCat("etcd ", address, ": ", response.error()));
  }
  return EtcdLease{response.id(), absl::Seconds(response.ttl())};
}

absl::StatusOr<absl::Duration> EtcdClient::KeepAliveOnce(int64_t lease) {
  Call call;
  if (absl::Status begun = Begin(call); !begun.ok()) return begun;
  const Endpoint& endpoint = call.endpoint();
  grpc::ClientContext& context = call.context;
  auto stream = endpoint.lease->LeaseKeepAlive(&context);
  pb::LeaseKeepAliveRequest request;
  request.set_id(lease);
  pb::LeaseKeepAliveResponse response;
  const bool exchanged = stream->Write(request) && stream->Read(&response);
  stream->WritesDone();
  if (!exchanged) {
    // The stream is over (a failed Write or Read says so): its status says why. A refused
    // token is dropped, and the keeper's next renewal fetches another.
    absl::Status status = Checked(endpoint, stream->Finish(), call.token);
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
  pb::LeaseRevokeRequest request;
  request.set_id(lease);
  pb::LeaseRevokeResponse response;
  absl::Status status = Unary([&](const Endpoint& endpoint, grpc::ClientContext& context) {
    return endpoint.lease->LeaseRevoke(&context, request, &response);
  });
  if (absl::IsNotFound(status)) return absl::OkStatus();  // "requested lease not found"
  return status;
}

absl::StatusOr<KeyValue> EtcdClient::Get(const std::string& key, int64_t* revision) {
  pb::RangeRequest request;
  request.set_key(key);
  pb::RangeResponse response;
  absl::Status status = Unary([&](const Endpoint& endpoint, grpc::ClientContext& context) {
    return endpoint.kv->Range(&context, request, &response);
  });
  if (!status.ok()) return status;
  if (revision != nullptr) *revision = response.header().revision();
  if (response.kvs_size() == 0) return absl::NotFoundError(absl::StrCat("no etcd key ", key));
  return FromProto(response.kvs(0));
}

absl::StatusOr<std::vector<KeyValue>> EtcdClient::GetPrefix(const std::string& prefix,
                                                            int64_t* revision) {
  pb::RangeRequest request;
  request.set_key(prefix);
  request.set_range_end(PrefixEnd(prefix));
  pb::RangeResponse response;
  absl::Status status = Unary([&](const Endpoint& endpoint, grpc::ClientContext& context) {
    return endpoint.kv->Range(&context, request, &response);
  });
  if (!status.ok()) return status;
  if (revision != nullptr) *revision = response.header().revision();
  std::vector<KeyValue> out;
  out.reserve(response.kvs_size());
  for (const mvccpb::KeyValue& kv : response.kvs()) out.push_back(FromProto(kv));
  return out;
}

absl::StatusOr<int64_t> EtcdClient::Put(const std::string& key, const std::string& value,
                                        int64_t lease) {
  pb::PutRequest request;
  request.set_key(key);
  request.set_value(value);
  request.set_lease(lease);
  pb::PutResponse response;
  absl::Status status = Unary([&](const Endpoint& endpoint, grpc::ClientContext& context) {
    return endpoint.kv->Put(&context, request, &response);
  });
  if (!status.ok()) return status;
  return response.header().revision();
}

absl::StatusOr<pb::TxnResponse> EtcdClient::Txn(const pb::TxnRequest& request) {
  pb::TxnResponse response;
  absl::Status status = Unary([&](const Endpoint& endpoint, grpc::ClientContext& context) {
    return endpoint.kv->Txn(&context, request, &response);
  });
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
  Target target = Current();
  const Endpoint& endpoint = *target.endpoint;
  std::unique_ptr<EtcdWatch> watch(new EtcdWatch());
  watch->endpoint_ = endpoint.address;
  watch->channels_ = std::move(target.channels);
  // No deadline: a watch lasts. gRPC's keep-alive (Connect) notices a member that went away.
  std::string token;
  if (absl::Status prepared = Prepare(endpoint, watch->context_, /*deadline=*/false, token);
      !prepared.ok()) {
    return prepared;
  }
  pb::WatchRequest request;
  pb::WatchCreateRequest* create = request.mutable_create_request();
  create->set_key(key);
  if (prefix) create->set_range_end(PrefixEnd(key));
  create->set_start_revision(start_revision);
  pb::WatchResponse created;
  if (grpc::Status ended; !watch->Start(*endpoint.watch, request, created, ended)) {
    absl::Status status = Checked(endpoint, ended, token);
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

}  // namespace coordination
