// ArenaAllocator: gRPC callback-API message allocator that puts each call's request and
// response on one protobuf Arena. A batched request of N items otherwise costs N+ separate heap
// allocations and frees (one std::string per item in the repeated field); on the arena they
// come from one 16 KiB block embedded in the per-call holder, and are freed at once when gRPC
// releases the call.
//
// Thread-safety: AllocateMessages may be called from any number of threads at once (it only
// allocates); each holder belongs to one call.
#ifndef SERVICE_ARENA_ALLOCATOR_H_
#define SERVICE_ARENA_ALLOCATOR_H_

#include <google/protobuf/arena.h>
#include <grpcpp/support/message_allocator.h>

#include <array>

namespace service {

template <typename Request, typename Response>
class ArenaAllocator final : public grpc::MessageAllocator<Request, Response> {
 public:
  grpc::MessageHolder<Request, Response>* AllocateMessages() override { return new Holder(); }

 private:
  class Holder final : public grpc::MessageHolder<Request, Response> {
   public:
    Holder() : arena_(Options(initial_block_)) {
      this->set_request(google::protobuf::Arena::CreateMessage<Request>(&arena_));
      this->set_response(google::protobuf::Arena::CreateMessage<Response>(&arena_));
    }
    void Release() override { delete this; }

   private:
    static google::protobuf::ArenaOptions Options(std::array<char, 16 << 10>& block) {
      google::protobuf::ArenaOptions options;
      options.initial_block = block.data();
      options.initial_block_size = block.size();
      return options;
    }
    // Declared before arena_: the arena's first block must exist when the arena is built.
    std::array<char, 16 << 10> initial_block_;
    google::protobuf::Arena arena_;
  };
};

}  // namespace service

#endif  // SERVICE_ARENA_ALLOCATOR_H_
