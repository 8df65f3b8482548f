// grpc.reflection.v1alpha.ServerReflection, as grpcurl and buf curl call it, on gRPC's callback
// API: a stream costs no thread while it waits for its next request.
//
// gRPC's own reflection service is synchronous (a thread per stream, for any client) and reads
// each request whole whatever it announces. This one answers one request at a time from the
// generated descriptor pool, refuses a request of more than kMaxRequestBytes
// (INVALID_ARGUMENT), and holds nothing between requests. Like every gRPC
// method it still receives a request whole before it can look at its size, so with a token
// file it needs a token unless --open_methods opens it (token_gate.h).
//
//   ReflectionService reflection({"bloom.v1.BloomFilterService", "grpc.health.v1.Health"});
//   builder.RegisterService(&reflection);  // outlives the server, as any service
//
// Answers: list_services (the names given, and its own), file_by_filename,
// file_containing_symbol, file_containing_extension (each with the file's transitive
// dependencies) and all_extension_numbers_of_type; a name it does not know gets an
// error_response with NOT_FOUND, as gRPC's does.
//
// Thread-safety: thread-safe (each stream's reactions never overlap: one operation at a time).
#ifndef SERVICE_REFLECTION_H_
#define SERVICE_REFLECTION_H_

#include <grpcpp/impl/service_type.h>

#include <cstddef>
#include <string>
#include <vector>

namespace service {

class ReflectionService final : public grpc::Service {
 public:
  static constexpr size_t kMaxRequestBytes = 64 << 10;

  // `services`: the full names of the other services the server serves.
  explicit ReflectionService(std::vector<std::string> services);

 private:
  class Stream;
  const std::vector<std::string> services_;
};

}  // namespace service

#endif  // SERVICE_REFLECTION_H_
