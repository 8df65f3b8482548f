// BloomService's item calls (service/bloom_service.h): Add and MightContain, from messages or
// from the views direct_parse.h reads off the wire; adds through the store's group committer.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "service/bloom_service.h"
#include "service/call_scope.h"
#include "service/convert.h"

namespace service {

namespace {

// An Add/MightContainRequest message as the views direct_parse.h reads off the wire: its
// items, then its raw_items, pointing into the message.
template <typename Request>
ItemsRequestView ViewOf(const Request& request) {
  ItemsRequestView view;
  view.name = request.name();
  view.items.reserve(request.items_size() + request.raw_items_size());
  for (const std::string& item : request.items()) view.items.emplace_back(item);
  view.text_items = view.items.size();
  for (const std::string& item : request.raw_items()) view.items.emplace_back(item);
  return view;
}

}  // namespace

grpc::Status BloomService::HandleAdd(const bloom::v1::AddRequest& request,
                                     bloom::v1::AddResponse* response,
                                     grpc::ServerContextBase* context) {
  // The path of the server's own unary Add: the request as views (as direct_parse.h reads it
  // off the wire), served through the group committer. So in-process callers (tests, fuzzing)
  // exercise what production runs.
  ItemsRequestView view = ViewOf(request);
  std::string create_spec;
  if (request.has_create_if_missing()) {
    create_spec = request.create_if_missing().SerializeAsString();
    view.create_if_missing.emplace_back(create_spec);
  }
  std::unique_ptr<bool[]> added(new bool[view.items.size()]);
  grpc::Status status = HandleAddItems(view, added.get(), context);
  if (status.ok()) {
    response->mutable_added()->Add(added.get(), added.get() + view.items.size());
    response->set_sequence(store_->LatestSequence());
  }
  return status;
}

grpc::Status BloomService::HandleMightContain(const bloom::v1::MightContainRequest& request,
                                              bloom::v1::MightContainResponse* response,
                                              grpc::ServerContextBase* context) {
  // The path of the server's own unary MightContain, as HandleAdd's.
  ItemsRequestView view = ViewOf(request);
  view.absent_if_missing = request.absent_if_missing();
  view.min_sequence = request.min_sequence();
  std::unique_ptr<bool[]> present(new bool[view.items.size()]);
  grpc::Status status = HandleMightContainItems(view, present.get(), context);
  if (status.ok()) {
    response->mutable_present()->Add(present.get(), present.get() + view.items.size());
  }
  return status;
}

absl::Status AbsentIfMissing(absl::Status checked, bool absent_if_missing,
                             absl::Span<bool> present) {
  if (!absl::IsNotFound(checked) || !absent_if_missing) return checked;
  std::fill(present.begin(), present.end(), false);  // never added
  return absl::OkStatus();
}

namespace {

// One Add call served through the store's group committer (storage/write/group_commit.h). It owns
// its CallScope (the call counts as in flight until `finish`) and deletes itself once
// finished; the request's bytes and `answers` belong to the caller until then.
class AddCallJob final : public storage::GroupCommitter::Job {
 public:
  using Finish = absl::AnyInvocable<void(grpc::Status) &&>;

  AddCallJob(storage::FilterStore* store, std::unique_ptr<CallScope> log,
             const ItemsRequestView& request, absl::optional<bloom::FilterParams> create_spec,
             bool* answers, Finish finish)
      : store_(store),
        log_(std::move(log)),
        request_(request),
        create_spec_(create_spec),
        answers_(answers),
        finish_(std::move(finish)) {}

  void Queue(storage::OperationBatch& batch) override {
    ticket_ = batch.Add(request_.name, request_.items,
                        create_spec_.has_value() ? &*create_spec_ : nullptr);
  }
  void Answer(storage::OperationBatch& batch) override {
    absl::StatusOr<std::unique_ptr<bool[]>> added = batch.TakeAnswers(ticket_);
    status_ = added.status();
    if (added.ok()) std::copy_n(added->get(), request_.items.size(), answers_);
  }
  void Fail(const absl::Status& why) override { status_ = why; }
  void Done() override {
    if (status_.ok() && store_->syncs_adds()) {
      // --sync: answered once the WAL syncer's group fsync covers the add, from its thread.
      store_->WhenDurable([this](const absl::Status& synced) { Complete(synced); });
      return;
    }
    Complete(status_);
  }

 private:
  void Complete(const absl::Status& status) {
    std::move(finish_)(log_->Done(status));
    delete this;
  }

  storage::FilterStore* const store_;
  const std::unique_ptr<CallScope> log_;
  const ItemsRequestView& request_;  // the caller's, valid until `finish`
  const absl::optional<bloom::FilterParams> create_spec_;
  bool* const answers_;
  Finish finish_;
  storage::OperationBatch::Ticket ticket_ = 0;
  absl::Status status_;
};

}  // namespace

void BloomService::HandleAddItemsGrouped(const ItemsRequestView& request, bool* answers,
                                         grpc::ServerContextBase* context,
                                         absl::AnyInvocable<void(grpc::Status) &&> finish) {
  auto log = std::make_unique<CallScope>(this, rpcs::Rpc::kAdd, context, request.name,
                                         request.items.size());
  absl::Status status = log->Admit();
  if (status.ok()) status = CheckItems(request.items, request.text_items);
  absl::optional<bloom::FilterParams> create_spec;
  if (status.ok()) {
    absl::StatusOr<absl::optional<bloom::FilterParams>> spec = CreateSpecOf(request);
    if (spec.ok()) {
      create_spec = *std::move(spec);
    } else {
      status = spec.status();
    }
  }
  if (!status.ok()) {
    std::move(finish)(log->Done(status));
    return;
  }
  // Served now on this thread, or by the thread already serving other calls' adds; the job
  // deletes itself once `finish` has run.
  const absl::string_view names[] = {request.name};
  store_->committer().Submit(new AddCallJob(store_, std::move(log), request, create_spec, answers,
                                            SettledWrite(names, context, std::move(finish))));
}

grpc::Status BloomService::HandleAddItems(const ItemsRequestView& request, bool* answers,
                                          grpc::ServerContextBase* context) {
  return WaitFor(
      [&](Finish finish) { HandleAddItemsGrouped(request, answers, context, std::move(finish)); });
}

grpc::Status BloomService::HandleMightContainItems(const ItemsRequestView& request, bool* answers,
                                                   grpc::ServerContextBase* context) {
  CallScope log(this, rpcs::Rpc::kMightContain, context, request.name, request.items.size());
  if (absl::Status admitted = log.Admit(); !admitted.ok()) return log.Done(admitted);
  if (absl::Status valid = CheckItems(request.items, request.text_items); !valid.ok()) {
    return log.Done(valid);
  }
  return log.Done(AbsentIfMissing(store_->MightContainInto(request.name, request.items, answers),
                                  request.absent_if_missing,
                                  absl::MakeSpan(answers, request.items.size())));
}

}  // namespace service
