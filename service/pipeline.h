// Pipeline: bloom.v1's Pipeline stream, many Add/MightContain/Remove/Count operations over one
// long-lived bidirectional stream, answered in request order (see the rpc's comment in
// bloom.proto).
//
// Each stream is a PipelineReactor on gRPC's callback API, so a stream costs no thread. It reads
// each PipelineRequest as bytes and parses it into views of its items (direct_parse.h), which
// its operations keep until answered (no string per item); answers are PipelineResponse
// messages, serialized as they are written.
//  - it is admitted once, from its metadata, before any message is read (token, draining,
//    deadline); each add is then checked against the token's role;
//  - one read is in flight while fewer than `pipeline_window` operations, and fewer than
//    kPipelineReadAheadBytes of requests, are unanswered; beyond that it stops reading, and
//    HTTP/2 flow control pushes back on the client;
//  - operations read while earlier ones are being served wait and are served next, together:
//    consecutive adds to one filter go to the store as one add (one journal write, one fsync
//    with --sync), and likewise checks. Nothing waits on a timer: under load batches grow by
//    themselves, alone an operation is served at once;
//  - a batch with adds goes through the store's group committer (storage/write/group_commit.h):
//    the batches of streams (and unary Adds) that wait together share one RocksDB write, and
//    are served on whichever thread is already serving, so no gRPC thread waits for another's
//    write; a batch of checks only is answered on the thread that read it;
//  - one write is in flight, the rest queued in order;
//  - on shutdown it stops reading, answers what it has read and finishes UNAVAILABLE.
//
// PipelineStreams is the set of live streams, for shutdown.
//
// Thread-safety: PipelineStreams is thread-safe. A PipelineReactor's reactions may run on
// several gRPC threads at once; its state is guarded by its mutex, and the store is called
// without holding it.
#ifndef SERVICE_PIPELINE_H_
#define SERVICE_PIPELINE_H_

#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/server_callback.h>

#include <cstddef>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "bloom/v1/bloom.grpc.pb.h"
#include "common/mutex.h"

namespace service {

class BloomService;
class PipelineReactor;

// Requests read ahead of their answers, in bytes, before a stream stops reading (the request
// that crosses it is still taken: at most this plus one message per stream).
inline constexpr size_t kPipelineReadAheadBytes = 4 << 20;

class PipelineStreams {
 public:
  PipelineStreams() = default;
  PipelineStreams(const PipelineStreams&) = delete;
  PipelineStreams& operator=(const PipelineStreams&) = delete;

  // Starts serving a new stream of `service` (which must outlive it); a draining service or a
  // refused token finishes it at once.
  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* Start(
      BloomService* service, grpc::CallbackServerContext* context);

  // Asks every live stream to stop reading, answer what it has read and finish UNAVAILABLE.
  // Does not wait: see empty().
  void ShutdownAll();
  bool empty() const;

 private:
  friend class PipelineReactor;
  void Remove(PipelineReactor* reactor);

  mutable bloomsync::Mutex mu_;
  // Owns each live stream's reactor until its OnDone.
  absl::flat_hash_map<PipelineReactor*, std::shared_ptr<PipelineReactor>> live_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace service

#endif  // SERVICE_PIPELINE_H_
