module github.com/bloom-server/bloom-server/client/go

// The versions Debian 12 ships, which the tests build against offline (build.sh), or any later
// ones. genproto is the snapshot gRPC v1.33.3 requires.
go 1.19

require (
	google.golang.org/grpc v1.33.3
	google.golang.org/protobuf v1.28.1
)

require (
	github.com/golang/protobuf v1.5.2 // indirect
	golang.org/x/net v0.7.0 // indirect
	golang.org/x/sys v0.3.0 // indirect
	golang.org/x/text v0.7.0 // indirect
	google.golang.org/genproto v0.0.0-20200526211855-cb27e3aa2013 // indirect
)
