// Add and MightContain, the unary calls that carry items, read straight from their wire bytes
// (direct_parse.h) and served one of two ways:
//
// - CallbackItemService (the default): on gRPC's callback API, like every other call.
// - AsyncItemService with ItemCalls (--item_call_threads=N): on gRPC's async API, by N threads
//   that each own a completion queue. With gRPC's "poll" polling strategy (bloom-server sets it
//   in this mode, main.cc) each connection is polled by one of these threads, and that thread
//   reads a call, serves it and sends the answer itself, which saves most of the CPU a call
//   spends passing between threads on the callback API. The price: gRPC's callback streams
//   (Pipeline, and so the pipelined clients) cost more under the poll strategy, since a stream
//   whose connection one of these threads polls has every read handed to gRPC's callback
//   threads; and one connection's unary calls are served by one thread at a time.
//   docs/performance.md has the figures: a server for batched unary calls gains, one for the
//   pipelined clients' small calls loses.
//
// An Add goes through the group committer and may be answered from another thread
// (BloomService::HandleAddItemsGrouped). On a follower both are forwarded to the primary
// (forwarder.h), as the other calls are.
//
//   AsyncItemService service(core);            // registered with `builder`
//   ItemCalls calls(core, &service, threads);
//   calls.AddQueues(builder);                   // before builder.BuildAndStart()
//   calls.Start();                              // after it
//   server->Shutdown(deadline);
//   calls.Shutdown();                           // then destroy the server, then `calls`
//
// Thread-safety: the services are thread-safe. ItemCalls: AddQueues, Start and Shutdown are
// called by one owner, in that order; calls are served on the queues' threads and on the group
// committer's.
#ifndef SERVICE_ITEM_CALLS_H_
#define SERVICE_ITEM_CALLS_H_

#include <grpcpp/server_builder.h>

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "common/mutex.h"
#include "service/bloom_service.h"
#include "service/callback_service.h"

namespace service {

class CallbackItemService final
    : public bloom::v1::BloomFilterService::WithRawCallbackMethod_Add<
          bloom::v1::BloomFilterService::WithRawCallbackMethod_MightContain<BloomCallbackService>> {
 public:
  // `core` must outlive this service.
  explicit CallbackItemService(BloomService* core) { core_ = core; }

  grpc::ServerUnaryReactor* Add(grpc::CallbackServerContext* context,
                                const grpc::ByteBuffer* request,
                                grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* MightContain(grpc::CallbackServerContext* context,
                                         const grpc::ByteBuffer* request,
                                         grpc::ByteBuffer* response) override;
};

// Add and MightContain are async methods (RequestAdd, RequestMightContain): ItemCalls asks for and
// serves them.
class AsyncItemService final
    : public bloom::v1::BloomFilterService::WithRawMethod_Add<
          bloom::v1::BloomFilterService::WithRawMethod_MightContain<BloomCallbackService>> {
 public:
  // `core` must outlive this service.
  explicit AsyncItemService(BloomService* core) { core_ = core; }
};

class ItemCalls {
 public:
  // `core` and `service` must outlive this. `threads`: queues (and their threads), at least 1.
  ItemCalls(BloomService* core, AsyncItemService* service, int threads);
  ItemCalls(const ItemCalls&) = delete;
  ItemCalls& operator=(const ItemCalls&) = delete;
  ~ItemCalls();

  void AddQueues(grpc::ServerBuilder& builder);
  // Asks for the first calls and starts the threads.
  void Start();
  // After the server's Shutdown (which ends the calls not yet answered): waits for the adds still
  // being written (up to a few seconds), then shuts the queues down and joins their threads.
  void Shutdown();

 private:
  class Call;
  enum class Method { kAdd, kMightContain };
  struct Queue {
    std::unique_ptr<grpc::ServerCompletionQueue> completion;
    // Held while anything is put on `completion` from outside its thread, so that nothing is
    // after it is shut down.
    bloomsync::Mutex mu;
    bool shut ABSL_GUARDED_BY(mu) = false;
    std::thread thread;
  };

  // A fresh call waiting for the next `method` call on `queue` (none once it is shut).
  void Request(Queue& queue, Method method);
  static void Run(Queue* queue);

  BloomService* const core_;
  AsyncItemService* const service_;
  const int threads_;
  std::vector<std::unique_ptr<Queue>> queues_;
  bool started_ = false;
  // Calls read and not yet answered.
  std::atomic<int> answering_{0};
};

}  // namespace service

#endif  // SERVICE_ITEM_CALLS_H_
