// ItemCalls: Add and MightContain, the unary calls that carry items, served on gRPC's async API
// by threads that each own a completion queue.
//
// Why these two are not callback calls like the rest (bloom_service.h): clients make them by the
// million, and most of what one costs is gRPC's. On the callback API a call passes between
// threads (the poller that read it, the thread that runs its handler, the one that sends its
// answer). Here, with gRPC's "poll" polling strategy (bloom-server sets it, main.cc), each
// connection is polled by one of these threads, and that thread reads a call, serves it and
// sends the answer itself, which saves most of the CPU a call spent passing between threads
// (docs/performance.md has the figures).
// The price: one connection's Add and MightContain calls are served by one thread at a time; a
// client spreads over more threads with more connections (the pipelined clients' streams are
// callback streams, served by any thread).
//
// Requests are read from their wire bytes (direct_parse.h). An Add goes through the group
// committer and may be answered from another thread (BloomService::HandleAddItemsGrouped). On a
// follower both are forwarded to the primary (forwarder.h), as the callback calls are.
//
//   ItemCalls calls(core, &service, threads);  // `service` is registered with `builder`
//   calls.AddQueues(builder);                   // before builder.BuildAndStart()
//   calls.Start();                              // after it
//   server->Shutdown(deadline);
//   calls.Shutdown();                           // then destroy the server, then `calls`
//
// Thread-safety: AddQueues, Start and Shutdown are called by one owner, in that order; calls are
// served on the queues' threads and on the group committer's.
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

namespace service {

class ItemCalls {
 public:
  // `core` and `service` must outlive this. `threads`: queues (and their threads), at least 1.
  ItemCalls(BloomService* core, BloomCallbackService* service, int threads);
  ItemCalls(const ItemCalls&) = delete;
  ItemCalls& operator=(const ItemCalls&) = delete;
  ~ItemCalls();

  void AddQueues(grpc::ServerBuilder& builder);
  // Asks for the first calls and starts the threads.
  void Start();
  // After the server's Shutdown (which ends the calls not yet answered): waits for the adds still
  // being written (up to a few seconds), then shuts the queues down and joins their threads.
  void Shutdown();

  // The threads a server uses when ServerOptions leaves it open: one per core, 2 to 16.
  static int DefaultThreads();

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
  BloomCallbackService* const service_;
  const int threads_;
  std::vector<std::unique_ptr<Queue>> queues_;
  bool started_ = false;
  // Calls read and not yet answered.
  std::atomic<int> answering_{0};
};

}  // namespace service

#endif  // SERVICE_ITEM_CALLS_H_
