#include "loadtest/echo_server.h"

#include <grpcpp/server_builder.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <thread>
#include <vector>

#include "bloom/v1/bloom.grpc.pb.h"

namespace loadtest {
namespace {

using bloom::v1::PipelineRequest;
using bloom::v1::PipelineResponse;

template <typename Request>
int ItemCount(const Request& request) {
  return request.items_size() + request.raw_items_size();
}

void Answer(const PipelineRequest& request, PipelineResponse& response) {
  response.Clear();
  response.set_id(request.id());
  if (request.has_add()) {
    response.mutable_add()->mutable_added()->Resize(ItemCount(request.add()), true);
  } else {
    response.mutable_might_contain()->mutable_present()->Resize(ItemCount(request.might_contain()),
                                                                true);
  }
}

// Echoes a Pipeline stream: one read, then its answer, then the next read (one message in
// flight, as bloom-bench's pipeline transport sends them). A message's `more` is answered in
// its response's `more`, as bloom-server does, so the C++ client's pipelined mode, which packs
// a batch into one message when the server says it can, runs against this floor too.
class EchoStream final : public grpc::ServerBidiReactor<PipelineRequest, PipelineResponse> {
 public:
  explicit EchoStream(grpc::CallbackServerContext* context) {
    context->AddInitialMetadata("bloom-pipeline-more", "1");
    StartRead(&request_);
  }
  void OnReadDone(bool ok) override {
    if (!ok) {
      Finish(grpc::Status::OK);
      return;
    }
    Answer(request_, response_);
    for (const PipelineRequest& more : request_.more()) Answer(more, *response_.add_more());
    StartWrite(&response_);
  }
  void OnWriteDone(bool ok) override {
    if (!ok) {
      Finish(grpc::Status::CANCELLED);
      return;
    }
    StartRead(&request_);
  }
  void OnDone() override { delete this; }

 private:
  PipelineRequest request_;
  PipelineResponse response_;
};

// Add and MightContain are async methods served as bloom-server serves them (item_calls.h):
// threads that each own a completion queue, under gRPC's poll strategy.
// The rest are callback methods (those not overridden below answer UNIMPLEMENTED), so that no
// method is synchronous: gRPC would start a pool of threads for those.
using bloom::v1::BloomFilterService;
using EchoServiceBase = BloomFilterService::WithAsyncMethod_Add<
    BloomFilterService::WithAsyncMethod_MightContain<BloomFilterService::WithCallbackMethod_Reserve<
        BloomFilterService::WithCallbackMethod_Delete<
            BloomFilterService::WithCallbackMethod_Pipeline<
                BloomFilterService::WithCallbackMethod_Stats<
                    BloomFilterService::WithCallbackMethod_List<
                        BloomFilterService::WithCallbackMethod_Export<
                            BloomFilterService::WithCallbackMethod_Import<
                                BloomFilterService::WithCallbackMethod_Merge<
                                    BloomFilterService::WithCallbackMethod_Remove<
                                        BloomFilterService::WithCallbackMethod_Count<
                                            BloomFilterService::Service>>>>>>>>>>>>;

class EchoService final : public EchoServiceBase {
 public:
  // bloom-bench prepares filters with Delete + Reserve: both succeed without doing anything.
  grpc::ServerUnaryReactor* Reserve(grpc::CallbackServerContext* context,
                                    const bloom::v1::ReserveRequest*,
                                    bloom::v1::ReserveResponse*) override {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }
  grpc::ServerUnaryReactor* Delete(grpc::CallbackServerContext* context,
                                   const bloom::v1::DeleteRequest*,
                                   bloom::v1::DeleteResponse*) override {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }
  grpc::ServerBidiReactor<PipelineRequest, PipelineResponse>* Pipeline(
      grpc::CallbackServerContext* context) override {
    return new EchoStream(context);
  }
};

// One unary call on a queue: asked for, answered, deleted (its address tags both events).
class EchoCall {
 public:
  virtual ~EchoCall() = default;
  virtual void Proceed(bool ok) = 0;
};

template <typename Request, typename Response>
class EchoUnary final : public EchoCall {
 public:
  using Ask = void (EchoServiceBase::*)(grpc::ServerContext*, Request*,
                                        grpc::ServerAsyncResponseWriter<Response>*,
                                        grpc::CompletionQueue*, grpc::ServerCompletionQueue*,
                                        void*);
  EchoUnary(EchoService* service, grpc::ServerCompletionQueue* queue, Ask ask)
      : service_(service), queue_(queue), ask_(ask) {
    (service_->*ask_)(&context_, &request_, &responder_, queue_, queue_, this);
  }
  void Proceed(bool ok) override {
    if (answered_ || !ok) {
      delete this;
      return;
    }
    new EchoUnary(service_, queue_, ask_);  // the next call (refused once the server shut down)
    Fill();
    answered_ = true;
    responder_.Finish(response_, grpc::Status::OK, this);
  }

 private:
  void Fill();

  EchoService* const service_;
  grpc::ServerCompletionQueue* const queue_;
  const Ask ask_;
  bool answered_ = false;
  grpc::ServerContext context_;
  Request request_;
  Response response_;
  grpc::ServerAsyncResponseWriter<Response> responder_{&context_};
};

template <>
void EchoUnary<bloom::v1::AddRequest, bloom::v1::AddResponse>::Fill() {
  response_.mutable_added()->Resize(ItemCount(request_), true);
}
template <>
void EchoUnary<bloom::v1::MightContainRequest, bloom::v1::MightContainResponse>::Fill() {
  response_.mutable_present()->Resize(ItemCount(request_), true);
}

}  // namespace

int RunEchoServer(const std::string& listen, const std::string& port_file) {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  // Blocked here, before gRPC starts its threads, so that only sigwait below receives them.
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  // As bloom-server's main() does, before gRPC starts (service/item_calls.h says why).
  setenv("GRPC_POLL_STRATEGY", "poll", /*overwrite=*/0);
  EchoService service;
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(listen, grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  std::vector<std::unique_ptr<grpc::ServerCompletionQueue>> queues;
  for (int i = 0; i < std::clamp(static_cast<int>(std::thread::hardware_concurrency()), 2, 16);
       ++i) {
    queues.push_back(builder.AddCompletionQueue());
  }
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    std::fprintf(stderr, "bloom-bench: cannot serve the echo service on %s\n", listen.c_str());
    return 1;
  }
  if (!port_file.empty()) {
    std::ofstream(port_file + ".tmp") << port << "\n";
    std::rename((port_file + ".tmp").c_str(), port_file.c_str());
  }
  std::vector<std::thread> threads;
  for (const std::unique_ptr<grpc::ServerCompletionQueue>& queue : queues) {
    for (int i = 0; i < 16; ++i) {
      new EchoUnary<bloom::v1::AddRequest, bloom::v1::AddResponse>(&service, queue.get(),
                                                                   &EchoServiceBase::RequestAdd);
      new EchoUnary<bloom::v1::MightContainRequest, bloom::v1::MightContainResponse>(
          &service, queue.get(), &EchoServiceBase::RequestMightContain);
    }
    threads.emplace_back([queue = queue.get()] {
      void* tag = nullptr;
      bool ok = false;
      while (queue->Next(&tag, &ok)) static_cast<EchoCall*>(tag)->Proceed(ok);
    });
  }
  std::printf("bloom-bench: echo service on port %d\n", port);
  std::fflush(stdout);
  int signal_number = 0;
  sigwait(&signals, &signal_number);
  server->Shutdown(std::chrono::system_clock::now());
  for (const std::unique_ptr<grpc::ServerCompletionQueue>& queue : queues) queue->Shutdown();
  for (std::thread& thread : threads) thread.join();
  return 0;
}

}  // namespace loadtest
