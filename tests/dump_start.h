// DumpStart: the first bytes of a filter's Export dump, for tests that import a dump's header
// and then stall (the hostile-client tests, on a server and through a follower).
//
// Thread-safety: as BloomClient's stub (thread-safe).
#ifndef TESTS_DUMP_START_H_
#define TESTS_DUMP_START_H_

#include <grpcpp/client_context.h>

#include <cstddef>
#include <string>

#include "bloom/v1/bloom.grpc.pb.h"
#include "client/bloom_client.h"

namespace bloomtest {

// The first `bytes` of filter `name`'s dump (its header and the start of its bits), from an
// Export cut short; empty if none came.
inline std::string DumpStart(bloomclient::BloomClient& client, const std::string& name,
                             size_t bytes) {
  grpc::ClientContext context;
  bloom::v1::ExportRequest request;
  request.set_name(name);
  auto reader = client.stub().Export(&context, request);
  bloom::v1::ExportChunk chunk;
  if (!reader->Read(&chunk)) return "";
  context.TryCancel();
  reader->Finish().IgnoreError();
  return chunk.data().substr(0, bytes);
}

}  // namespace bloomtest

#endif  // TESTS_DUMP_START_H_
