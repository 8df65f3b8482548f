#include "loadtest/echo_server.h"

#include <grpcpp/server_builder.h>

#include <csignal>
#include <cstdio>
#include <fstream>
#include <memory>

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

class EchoService final : public bloom::v1::BloomFilterService::CallbackService {
 public:
  grpc::ServerUnaryReactor* Add(grpc::CallbackServerContext* context,
                                const bloom::v1::AddRequest* request,
                                bloom::v1::AddResponse* response) override {
    response->mutable_added()->Resize(ItemCount(*request), true);
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }
  grpc::ServerUnaryReactor* MightContain(grpc::CallbackServerContext* context,
                                         const bloom::v1::MightContainRequest* request,
                                         bloom::v1::MightContainResponse* response) override {
    response->mutable_present()->Resize(ItemCount(*request), true);
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }
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

}  // namespace

int RunEchoServer(const std::string& listen, const std::string& port_file) {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  // Blocked here, before gRPC starts its threads, so that only sigwait below receives them.
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  EchoService service;
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(listen, grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    std::fprintf(stderr, "bloom-bench: cannot serve the echo service on %s\n", listen.c_str());
    return 1;
  }
  if (!port_file.empty()) {
    std::ofstream(port_file + ".tmp") << port << "\n";
    std::rename((port_file + ".tmp").c_str(), port_file.c_str());
  }
  std::printf("bloom-bench: echo service on port %d\n", port);
  std::fflush(stdout);
  int signal_number = 0;
  sigwait(&signals, &signal_number);
  server->Shutdown(std::chrono::system_clock::now());
  return 0;
}

}  // namespace loadtest
