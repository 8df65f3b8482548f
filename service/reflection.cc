#include "service/reflection.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/descriptor.pb.h>
#include <grpcpp/impl/codegen/proto_utils.h>
#include <grpcpp/impl/codegen/server_callback_handlers.h>
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/server_callback.h>

#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "grpc_reflection_v1alpha/reflection.pb.h"

namespace service {
namespace {

using google::protobuf::DescriptorPool;
using google::protobuf::FileDescriptor;
using grpc::reflection::v1alpha::ServerReflectionRequest;
using grpc::reflection::v1alpha::ServerReflectionResponse;

constexpr char kMethod[] = "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo";
constexpr char kService[] = "grpc.reflection.v1alpha.ServerReflection";
constexpr int kNotFound = 5;  // google.rpc.Code, as error_response.error_code
constexpr int kInvalidArgument = 3;

// `file` and, after it, every file it depends on, each once.
void AddFileAndDependencies(const FileDescriptor* file, ServerReflectionResponse& response) {
  absl::flat_hash_set<std::string> seen;
  std::vector<const FileDescriptor*> to_add = {file};
  while (!to_add.empty()) {
    const FileDescriptor* next = to_add.back();
    to_add.pop_back();
    if (!seen.insert(next->name()).second) continue;
    google::protobuf::FileDescriptorProto proto;
    next->CopyTo(&proto);
    response.mutable_file_descriptor_response()->add_file_descriptor_proto(
        proto.SerializeAsString());
    for (int i = next->dependency_count() - 1; i >= 0; --i) to_add.push_back(next->dependency(i));
  }
}

void SetError(int code, std::string message, ServerReflectionResponse& response) {
  response.mutable_error_response()->set_error_code(code);
  response.mutable_error_response()->set_error_message(std::move(message));
}

void AnswerFile(const FileDescriptor* file, absl::string_view what,
                ServerReflectionResponse& response) {
  if (file == nullptr) return SetError(kNotFound, absl::StrCat(what, " not found"), response);
  AddFileAndDependencies(file, response);
}

ServerReflectionResponse Answer(const ServerReflectionRequest& request,
                                const std::vector<std::string>& services) {
  const DescriptorPool* pool = DescriptorPool::generated_pool();
  ServerReflectionResponse response;
  response.set_valid_host(request.host());
  *response.mutable_original_request() = request;
  switch (request.message_request_case()) {
    case ServerReflectionRequest::kListServices:
      for (const std::string& name : services) {
        response.mutable_list_services_response()->add_service()->set_name(name);
      }
      break;
    case ServerReflectionRequest::kFileByFilename:
      AnswerFile(pool->FindFileByName(request.file_by_filename()),
                 absl::StrCat("file '", request.file_by_filename(), "'"), response);
      break;
    case ServerReflectionRequest::kFileContainingSymbol:
      AnswerFile(pool->FindFileContainingSymbol(request.file_containing_symbol()),
                 absl::StrCat("symbol '", request.file_containing_symbol(), "'"), response);
      break;
    case ServerReflectionRequest::kFileContainingExtension: {
      const auto& wanted = request.file_containing_extension();
      const google::protobuf::Descriptor* type =
          pool->FindMessageTypeByName(wanted.containing_type());
      const google::protobuf::FieldDescriptor* extension =
          type == nullptr ? nullptr : pool->FindExtensionByNumber(type, wanted.extension_number());
      AnswerFile(extension == nullptr ? nullptr : extension->file(),
                 absl::StrCat("extension ", wanted.extension_number(), " of '",
                              wanted.containing_type(), "'"),
                 response);
      break;
    }
    case ServerReflectionRequest::kAllExtensionNumbersOfType: {
      const google::protobuf::Descriptor* type =
          pool->FindMessageTypeByName(request.all_extension_numbers_of_type());
      if (type == nullptr) {
        SetError(kNotFound,
                 absl::StrCat("type '", request.all_extension_numbers_of_type(), "' not found"),
                 response);
        break;
      }
      std::vector<const google::protobuf::FieldDescriptor*> extensions;
      pool->FindAllExtensions(type, &extensions);
      auto* numbers = response.mutable_all_extension_numbers_response();
      numbers->set_base_type_name(type->full_name());
      for (const auto* extension : extensions) numbers->add_extension_number(extension->number());
      break;
    }
    case ServerReflectionRequest::MESSAGE_REQUEST_NOT_SET:
      SetError(kInvalidArgument, "the request asks for nothing", response);
      break;
  }
  return response;
}

}  // namespace

// One ServerReflectionInfo stream: read a request, write its answer, read the next, until the
// client half-closes. One operation is in flight at a time, so reactions never overlap.
class ReflectionService::Stream final
    : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  explicit Stream(const std::vector<std::string>* services) : services_(services) {
    StartRead(&request_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) return Finish(grpc::Status::OK);  // the client half-closed (or went away)
    if (request_.Length() > kMaxRequestBytes) {
      return Finish(grpc::Status(
          grpc::StatusCode::INVALID_ARGUMENT,
          absl::StrCat("a reflection request of more than ", kMaxRequestBytes, " bytes")));
    }
    ServerReflectionRequest request;
    // gRPC's protobuf deserializer, which also empties request_ for the next read.
    if (!grpc::SerializationTraits<ServerReflectionRequest>::Deserialize(&request_, &request)
             .ok()) {
      return Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                 "the request is not a ServerReflectionRequest"));
    }
    grpc::Slice answer(Answer(request, *services_).SerializeAsString());
    response_ = grpc::ByteBuffer(&answer, 1);
    StartWrite(&response_);
  }

  void OnWriteDone(bool ok) override {
    if (!ok) return Finish(grpc::Status(grpc::StatusCode::CANCELLED, "the client went away"));
    response_.Clear();
    StartRead(&request_);
  }

  void OnDone() override { delete this; }

 private:
  const std::vector<std::string>* const services_;
  grpc::ByteBuffer request_;
  grpc::ByteBuffer response_;
};

ReflectionService::ReflectionService(std::vector<std::string> services)
    : services_([&services] {
        services.emplace_back(kService);
        return std::move(services);
      }()) {
  AddMethod(new grpc::internal::RpcServiceMethod(kMethod, grpc::internal::RpcMethod::BIDI_STREAMING,
                                                 nullptr));
  MarkMethodRawCallback(
      0, new grpc::internal::CallbackBidiHandler<grpc::ByteBuffer, grpc::ByteBuffer>(
             [this](grpc::CallbackServerContext* /*context*/) { return new Stream(&services_); }));
}

}  // namespace service
