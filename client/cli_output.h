// bloom-cli's output: errors on stderr, messages as JSON, a filter's stats as text.
//
// Thread-safety: each writes to std::cout or stderr; call from one thread.
#ifndef CLIENT_CLI_OUTPUT_H_
#define CLIENT_CLI_OUTPUT_H_

#include "absl/status/status.h"
#include "bloom/v1/bloom.pb.h"
#include "google/protobuf/message.h"

namespace bloomcli {

// Prints "bloom-cli: CODE: message" on stderr; returns the exit status 1.
int Error(const absl::Status& status);

// `message` as JSON (proto field names, defaults included) on std::cout, without a newline.
void PrintJson(const google::protobuf::Message& message);

// A filter's stats as aligned "key: value" lines on std::cout.
void PrintStats(const bloom::v1::FilterStats& stats);

}  // namespace bloomcli

#endif  // CLIENT_CLI_OUTPUT_H_
