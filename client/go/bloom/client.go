// Package bloom is the Go client for bloom-server (bloom.v1.BloomFilterService).
//
//	client, err := bloom.Dial("127.0.0.1:50051", bloom.Options{})
//	defer client.Close()
//	_, err = client.Reserve(ctx, "users", bloom.Spec{Capacity: 1_000_000, ErrorRate: 0.01})
//	added, err := client.Add(ctx, "users", bloom.Strings("alice", "bob"))
//	seen, err := client.MightContain(ctx, "users", bloom.Strings("alice", "carol"))
//
// An item is its bytes: the string "a" and the bytes []byte("a") are the same item, in every
// client language. Lists longer than Options.BatchSize go out as several requests, in order
// (each request is atomic on the server; the list as a whole is not).
//
// Errors are gRPC status errors: status.Code(err) gives the server's code (codes.NotFound,
// codes.InvalidArgument, ...) and the message names the offending field. Every call takes a
// context: its deadline and cancellation apply to the call; without a deadline the client's
// Options.Timeout does.
//
// Pipelined mode (Options.Pipelined): Add, MightContain, Remove and Count calls of up to BatchSize
// items travel over bloom.v1.Pipeline streams (Count once the stream's server has said it takes
// counts; before, and with older servers, it is a unary call), and concurrent calls of one kind on
// the same filter from many goroutines are coalesced into one operation (pipeline.go): the server
// then pays per batch, not per call. A broken stream fails its unanswered calls with
// codes.Unavailable (retry an add, which is idempotent; a remove may have been made); the next call
// opens a new stream.
//
// Replicas: any pod of a replicated deployment serves any call (followers forward writes to
// the primary). Writes answer with a sequence; the client keeps the highest (LastSequence) and
// sends it with every read, so a follower answers a read only once it has applied this
// client's writes. ObserveSequence passes a sequence on from another client.
//
// Thread-safety: a Client may be used from many goroutines at once.
package bloom

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	bloomv1 "github.com/bloom-server/bloom-server/client/go/bloomv1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

// Options configure a Client. The zero value is a plaintext client with defaults.
type Options struct {
	// TLS, when not nil, connects with TLS using this configuration (RootCAs to verify the
	// server, Certificates for servers that require mutual TLS). nil: plaintext.
	TLS *tls.Config
	// Token is sent as "authorization: Bearer <Token>" with every call; "" sends none.
	Token string
	// Timeout bounds a call whose context has no deadline. 0 means 10 s.
	Timeout time.Duration
	// BatchSize is the number of items per Add/MightContain request. 0 means 10,000.
	BatchSize int
	// Pipelined sends Add, MightContain, Remove and Count over coalescing Pipeline streams.
	Pipelined bool
	// Streams is the number of Pipeline streams in pipelined mode (a filter's calls always
	// use the same one). 0 means 1.
	Streams int
	// ShardRouting, in a sharded deployment (several groups, a shard map in etcd), sends each
	// call for a filter straight to the primary of the group that owns it (shards.go), with a
	// connection (and in pipelined mode, streams) per group primary; without it, any pod serves
	// any call by forwarding it one hop. An unsharded server routes everything to target, as
	// without it. Sequences (read your writes) are then each group's own; LastSequence is the
	// target's.
	ShardRouting bool
}

// Spec is how a filter is sized and grows (bloom.v1.FilterSpec).
type Spec struct {
	Capacity   uint64
	ErrorRate  float64
	Expansion  uint32 // 0: the server's default (2)
	NonScaling bool
	// Window, when not 0, makes the filter forget items added longer ago than this, kept in
	// WindowSlices slices (0: the server's default, 8).
	Window       time.Duration
	WindowSlices uint32
	// IdleTTL, when not 0, deletes the filter after this long without an Add or MightContain.
	IdleTTL time.Duration
	// Cuckoo makes a cuckoo filter, which can Remove and Count items (and has no Window).
	Cuckoo bool
}

func (s Spec) proto() *bloomv1.FilterSpec {
	out := &bloomv1.FilterSpec{Capacity: s.Capacity, ErrorRate: s.ErrorRate,
		Expansion: s.Expansion, NonScaling: s.NonScaling, WindowSlices: s.WindowSlices}
	if s.Window != 0 {
		out.Window = durationpb.New(s.Window)
	}
	if s.IdleTTL != 0 {
		out.IdleTtl = durationpb.New(s.IdleTTL)
	}
	if s.Cuckoo {
		out.Kind = bloomv1.FilterKind_FILTER_KIND_CUCKOO
	}
	return out
}

// Stats is a filter's statistics as the server reports them.
type Stats = bloomv1.FilterStats

// Strings turns strings into items (their UTF-8 bytes).
func Strings(items ...string) [][]byte {
	out := make([][]byte, len(items))
	for i, item := range items {
		out[i] = []byte(item)
	}
	return out
}

// Client is a connection to one bloom-server (and with ShardRouting, to each group primary
// of its sharded deployment).
type Client struct {
	conn      *grpc.ClientConn
	stub      bloomv1.BloomFilterServiceClient
	opts      Options
	coalescer *coalescer // nil unless Options.Pipelined
	sequence  *sequence
	seed      *route       // conn, stub, coalescer and sequence as one
	shards    *shardRoutes // nil unless Options.ShardRouting
}

// routeFor is where filter name's calls go: the target, or with ShardRouting its group's
// primary.
func (c *Client) routeFor(name string) *route {
	if c.shards == nil {
		return c.seed
	}
	return c.shards.forName(name)
}

// ShardMapVersion is the version of the shard map this client routes by: 0 without
// ShardRouting, or for an unsharded deployment.
func (c *Client) ShardMapVersion() uint64 {
	if c.shards == nil {
		return 0
	}
	return c.shards.currentVersion()
}

// sequence is the highest write sequence a client has seen (read-your-writes).
type sequence struct{ value atomic.Uint64 }

func (s *sequence) observe(v uint64) {
	for {
		seen := s.value.Load()
		if v <= seen || s.value.CompareAndSwap(seen, v) {
			return
		}
	}
}

// LastSequence is the highest sequence a write through this client was given. Reads send it
// as min_sequence, so a follower answers them only once it has applied those writes.
func (c *Client) LastSequence() uint64 { return c.sequence.value.Load() }

// ObserveSequence raises LastSequence to one learned elsewhere (another client that wrote).
func (c *Client) ObserveSequence(v uint64) { c.sequence.observe(v) }

// Dial returns a client for target; gRPC connects on first use. target is "host:port", or
// "dns:///name:port" for several pods of a replicated deployment (every address the name has,
// e.g. a headless Service's): calls are then spread over the pods that answer, and a pod that
// goes away is skipped at once.
func Dial(target string, opts Options) (*Client, error) {
	if opts.Timeout <= 0 {
		opts.Timeout = 10 * time.Second
	}
	if opts.BatchSize <= 0 {
		opts.BatchSize = 10_000
	}
	transport := grpc.WithInsecure()
	if opts.TLS != nil {
		transport = grpc.WithTransportCredentials(credentials.NewTLS(opts.TLS))
	}
	// A pod restarting, or rebuilding its server in a new role when the primary fails over, is
	// back within a second or so: reconnect every few hundred milliseconds rather than after
	// gRPC's default backoff (1 s, growing to 2 min).
	reconnect := grpc.WithConnectParams(grpc.ConnectParams{
		Backoff: backoff.Config{
			BaseDelay: 200 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 5 * time.Second,
		},
		MinConnectTimeout: 200 * time.Millisecond,
	})
	// round_robin: with several addresses, a connection to each, calls spread over those that
	// answer (one address: as pick_first). grpc-go reads each connection on a goroutine of its
	// own, so a pod that goes away leaves the rotation at once; the C-core clients (C++, Python)
	// also retry reads for the case where they had not noticed yet. grpc-go 1.33 does not
	// retry without GRPC_GO_RETRY=on, and has no need to here.
	balance := grpc.WithDefaultServiceConfig(`{"loadBalancingConfig": [{"round_robin": {}}]}`)
	c := &Client{opts: opts}
	dialOptions := []grpc.DialOption{transport, reconnect, balance}
	if opts.ShardRouting {
		c.shards = &shardRoutes{timeout: opts.Timeout, token: c.withToken}
		dialOptions = append(dialOptions, grpc.WithUnaryInterceptor(c.shards.interceptor))
	}
	dial := func(target string) (*route, error) {
		conn, err := grpc.Dial(target, dialOptions...)
		if err != nil {
			return nil, err
		}
		r := &route{conn: conn, stub: bloomv1.NewBloomFilterServiceClient(conn), sequence: &sequence{}}
		if opts.Pipelined {
			r.coalescer = newCoalescer(r.stub, opts.BatchSize, opts.Streams, c.withToken, r.sequence)
		}
		return r, nil
	}
	seed, err := dial(target)
	if err != nil {
		return nil, err
	}
	c.seed, c.conn, c.stub, c.coalescer, c.sequence = seed, seed.conn, seed.stub, seed.coalescer,
		seed.sequence
	if c.shards != nil {
		c.shards.seed, c.shards.dial = seed, dial
		// Without the map now (the pod is not up yet), calls go through the pod named, which
		// forwards them, and the first forwarded answer fetches it.
		c.shards.refresh(0) //nolint:errcheck
	}
	return c, nil
}

// Close ends the pipelined streams (their unanswered calls fail) and the connection.
func (c *Client) Close() error {
	if c.shards != nil {
		c.shards.close()
	}
	if c.coalescer != nil {
		c.coalescer.close()
	}
	return c.conn.Close()
}

// withToken adds the bearer token to ctx's outgoing metadata.
func (c *Client) withToken(ctx context.Context) context.Context {
	if c.opts.Token == "" {
		return ctx
	}
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+c.opts.Token)
}

// callContext applies the token and, when ctx has no deadline, the client's timeout.
func (c *Client) callContext(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx = c.withToken(ctx)
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, c.opts.Timeout)
}

// Reserve creates a filter. Reserving an existing name with the same spec succeeds with
// created == false, so every replica may call it at start-up.
func (c *Client) Reserve(ctx context.Context, name string, spec Spec) (created bool, err error) {
	return c.reserve(ctx, c.routeFor(name), &bloomv1.ReserveRequest{Name: name, Spec: spec.proto()})
}

// ReserveLike creates an empty filter with the spec and hash seed of filter like, so that the
// two can be merged; created is false if it existed already, made like it.
func (c *Client) ReserveLike(ctx context.Context, name, like string) (created bool, err error) {
	return c.reserve(ctx, c.routeFor(name), &bloomv1.ReserveRequest{Name: name, Like: like})
}

func (c *Client) reserve(ctx context.Context, r *route, request *bloomv1.ReserveRequest) (bool, error) {
	ctx, cancel := c.callContext(ctx)
	defer cancel()
	resp, err := r.stub.Reserve(ctx, request)
	if err != nil {
		return false, err
	}
	r.sequence.observe(resp.Sequence)
	return resp.Created, nil
}

// Merge ORs the filters sources (made alike: ReserveLike) into target and returns the
// target's stats.
func (c *Client) Merge(ctx context.Context, target string, sources ...string) (*Stats, error) {
	ctx, cancel := c.callContext(ctx)
	defer cancel()
	r := c.routeFor(target)
	resp, err := r.stub.Merge(ctx, &bloomv1.MergeRequest{Target: target, Sources: sources})
	if err != nil {
		return nil, err
	}
	r.sequence.observe(resp.Sequence)
	return resp.Stats, nil
}

// Add adds items; added[i] reports that items[i] was (probably) new.
func (c *Client) Add(ctx context.Context, name string, items [][]byte) ([]bool, error) {
	return c.add(ctx, name, items, nil)
}

// AddOrCreate is Add that first creates the filter with spec if it does not exist.
func (c *Client) AddOrCreate(ctx context.Context, name string, spec Spec, items [][]byte) ([]bool, error) {
	return c.add(ctx, name, items, spec.proto())
}

func (c *Client) add(ctx context.Context, name string, items [][]byte, create *bloomv1.FilterSpec) ([]bool, error) {
	r := c.routeFor(name)
	return c.batched(ctx, items, func(ctx context.Context, batch [][]byte) ([]bool, error) {
		if r.coalescer != nil {
			return r.coalescer.call(ctx, &pendingCall{add: true, name: name, create: create, items: batch})
		}
		resp, err := r.stub.Add(ctx, &bloomv1.AddRequest{Name: name, RawItems: batch, CreateIfMissing: create})
		if err != nil {
			return nil, err
		}
		r.sequence.observe(resp.Sequence)
		return resp.Added, nil
	})
}

// MightContain checks items: present[i] false means items[i] was never added. NOT_FOUND if
// the filter does not exist.
func (c *Client) MightContain(ctx context.Context, name string, items [][]byte) ([]bool, error) {
	return c.mightContain(ctx, name, items, false)
}

// MightContainOrAbsent is MightContain where a filter that does not exist answers every item
// absent (nothing is created): a per-user "seen this?" check in one call.
func (c *Client) MightContainOrAbsent(ctx context.Context, name string, items [][]byte) ([]bool, error) {
	return c.mightContain(ctx, name, items, true)
}

func (c *Client) mightContain(ctx context.Context, name string, items [][]byte, absentIfMissing bool) ([]bool, error) {
	r := c.routeFor(name)
	return c.batched(ctx, items, func(ctx context.Context, batch [][]byte) ([]bool, error) {
		if r.coalescer != nil {
			return r.coalescer.call(ctx, &pendingCall{name: name, absent: absentIfMissing, items: batch})
		}
		resp, err := r.stub.MightContain(ctx, &bloomv1.MightContainRequest{
			Name: name, RawItems: batch, AbsentIfMissing: absentIfMissing,
			MinSequence: r.sequence.value.Load()})
		if err != nil {
			return nil, err
		}
		return resp.Present, nil
	})
}

// batched sends items in requests of at most BatchSize, in order, each under its own
// deadline, and checks that every answer has one result per item.
func (c *Client) batched(ctx context.Context, items [][]byte,
	send func(context.Context, [][]byte) ([]bool, error)) ([]bool, error) {
	if len(items) == 0 {
		return nil, status.Error(codes.InvalidArgument, "items must not be empty")
	}
	out := make([]bool, 0, len(items))
	for start := 0; start < len(items); start += c.opts.BatchSize {
		end := start + c.opts.BatchSize
		if end > len(items) {
			end = len(items)
		}
		callCtx, cancel := c.callContext(ctx)
		results, err := send(callCtx, items[start:end])
		cancel()
		if err != nil {
			if c.shards != nil {
				c.shards.afterError(err) // a pipelined operation's refusal (unary ones: interceptor)
			}
			return nil, err
		}
		if len(results) != end-start {
			return nil, status.Errorf(codes.Internal, "the server answered %d results for %d items",
				len(results), end-start)
		}
		out = append(out, results...)
	}
	return out, nil
}

// Remove removes one copy of each item from a cuckoo filter; removed[i] reports that the
// filter held one. FAILED_PRECONDITION for a Bloom filter. Remove only what was added:
// removing another item can remove a colliding item's copy, which then reads absent. Not
// idempotent: a retried Remove removes another copy.
func (c *Client) Remove(ctx context.Context, name string, items [][]byte) ([]bool, error) {
	r := c.routeFor(name)
	return c.batched(ctx, items, func(ctx context.Context, batch [][]byte) ([]bool, error) {
		if r.coalescer != nil {
			return r.coalescer.call(ctx, &pendingCall{remove: true, name: name, items: batch})
		}
		resp, err := r.stub.Remove(ctx, &bloomv1.RemoveRequest{Name: name, RawItems: batch})
		if err != nil {
			return nil, err
		}
		r.sequence.observe(resp.Sequence)
		return resp.Removed, nil
	})
}

// Count returns the copies of each item a cuckoo filter holds.
func (c *Client) Count(ctx context.Context, name string, items [][]byte) ([]uint32, error) {
	if len(items) == 0 {
		return nil, status.Error(codes.InvalidArgument, "items must not be empty")
	}
	out := make([]uint32, 0, len(items))
	r := c.routeFor(name)
	for start := 0; start < len(items); start += c.opts.BatchSize {
		end := start + c.opts.BatchSize
		if end > len(items) {
			end = len(items)
		}
		callCtx, cancel := c.callContext(ctx)
		if r.coalescer != nil {
			counts, sent, err := r.coalescer.callCount(callCtx, name, items[start:end])
			if sent {
				cancel()
				if err != nil {
					return nil, err
				}
				out = append(out, counts...)
				continue
			}
			// This stream's server has not said it takes counts yet: unary.
		}
		resp, err := r.stub.Count(callCtx, &bloomv1.CountRequest{
			Name: name, RawItems: items[start:end], MinSequence: r.sequence.value.Load()})
		cancel()
		if err != nil {
			return nil, err
		}
		if len(resp.Counts) != end-start {
			return nil, status.Errorf(codes.Internal, "the server answered %d counts for %d items",
				len(resp.Counts), end-start)
		}
		out = append(out, resp.Counts...)
	}
	return out, nil
}

// Stats returns a filter's statistics.
func (c *Client) Stats(ctx context.Context, name string) (*Stats, error) {
	ctx, cancel := c.callContext(ctx)
	defer cancel()
	r := c.routeFor(name)
	resp, err := r.stub.Stats(ctx, &bloomv1.StatsRequest{Name: name, MinSequence: r.sequence.value.Load()})
	if err != nil {
		return nil, err
	}
	return resp.Stats, nil
}

// Delete deletes a filter; the name can be reserved again at once.
func (c *Client) Delete(ctx context.Context, name string) error {
	ctx, cancel := c.callContext(ctx)
	defer cancel()
	r := c.routeFor(name)
	resp, err := r.stub.Delete(ctx, &bloomv1.DeleteRequest{Name: name})
	if err != nil {
		return err
	}
	r.sequence.observe(resp.Sequence)
	return nil
}

// List returns every filter whose name starts with prefix, in name order, reading all pages.
func (c *Client) List(ctx context.Context, prefix string) ([]*Stats, error) {
	var out []*Stats
	token := ""
	for {
		callCtx, cancel := c.callContext(ctx)
		resp, err := c.stub.List(callCtx, &bloomv1.ListRequest{Prefix: prefix, PageSize: 1000,
			PageToken: token, MinSequence: c.LastSequence()})
		cancel()
		if err != nil {
			return nil, err
		}
		out = append(out, resp.Filters...)
		if resp.NextPageToken == "" {
			return out, nil
		}
		token = resp.NextPageToken
	}
}

// Export writes the dump of a filter to w. ctx bounds the whole transfer (no client timeout
// is applied: a large filter may take longer than one call).
func (c *Client) Export(ctx context.Context, name string, w io.Writer) error {
	r := c.routeFor(name)
	stream, err := r.stub.Export(c.withToken(ctx),
		&bloomv1.ExportRequest{Name: name, MinSequence: r.sequence.value.Load()})
	if err != nil {
		return err
	}
	for {
		chunk, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if _, err := w.Write(chunk.Data); err != nil {
			return status.Errorf(codes.Aborted, "writing the dump: %v", err)
		}
	}
}

// Import creates filter name from a dump read from r. ctx bounds the whole transfer.
func (c *Client) Import(ctx context.Context, name string, r io.Reader) (*Stats, error) {
	return c.importDump(ctx, name, r, false)
}

// ImportMerging is Import that, if filter name exists (made alike the dump's), ORs the dump
// into it instead of failing with AlreadyExists.
func (c *Client) ImportMerging(ctx context.Context, name string, r io.Reader) (*Stats, error) {
	return c.importDump(ctx, name, r, true)
}

func (c *Client) importDump(ctx context.Context, name string, r io.Reader, merge bool) (*Stats, error) {
	ctx, cancel := context.WithCancel(c.withToken(ctx))
	defer cancel() // on a read error this ends the stream without committing anything
	to := c.routeFor(name)
	stream, err := to.stub.Import(ctx)
	if err != nil {
		return nil, err
	}
	buf := make([]byte, 1<<20)
	first := true
	for {
		n, readErr := io.ReadFull(r, buf)
		if n > 0 || first {
			chunk := &bloomv1.ImportChunk{Data: append([]byte(nil), buf[:n]...)}
			if first {
				chunk.Name = name
				chunk.MergeIntoExisting = merge
				first = false
			}
			if err := stream.Send(chunk); err != nil && !errors.Is(err, io.EOF) {
				return nil, err
			} else if err != nil {
				break // the server ended the stream: CloseAndRecv returns its status
			}
		}
		if errors.Is(readErr, io.EOF) || errors.Is(readErr, io.ErrUnexpectedEOF) {
			break
		}
		if readErr != nil {
			return nil, status.Errorf(codes.Aborted, "reading the dump: %v", readErr)
		}
	}
	resp, err := stream.CloseAndRecv()
	if err != nil {
		return nil, err
	}
	to.sequence.observe(resp.Sequence)
	return resp.Stats, nil
}

// statusFromOperation turns a Pipeline OperationError into a status error like the unary
// call's.
func statusFromOperation(e *bloomv1.OperationError) error {
	code := codes.Code(e.Code)
	if e.Code < 0 || e.Code > int32(codes.Unauthenticated) {
		return status.Error(codes.Unknown, fmt.Sprintf("code %d: %s", e.Code, e.Message))
	}
	return status.Error(code, e.Message)
}
