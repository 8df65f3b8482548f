// Package bloomv1 holds the Go code protoc generates from protos/bloom/v1/bloom.proto: the
// bloom.v1 messages and the BloomFilterService client and server. It is committed so that
// `go get` users need no protoc; client/go/check-stubs.sh (ctest go_stubs) fails when it no
// longer matches the .proto. Regenerate with `go generate ./...` in client/go.
package bloomv1

//go:generate protoc -I ../../../protos --go_out=.. --go_opt=module=github.com/bloom-server/bloom-server/client/go --go_opt=Mbloom/v1/bloom.proto=github.com/bloom-server/bloom-server/client/go/bloomv1;bloomv1 --go-grpc_out=.. --go-grpc_opt=module=github.com/bloom-server/bloom-server/client/go --go-grpc_opt=Mbloom/v1/bloom.proto=github.com/bloom-server/bloom-server/client/go/bloomv1;bloomv1 bloom/v1/bloom.proto
