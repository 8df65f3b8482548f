// The Go client's pipelined mode: concurrent small calls coalesced over Pipeline streams.
//
// Calls of one kind (add, check, remove, count) on the same filter from many goroutines that wait
// together go out as one operation with all their items (removes in the order they were made), with
// no timer: a call that finds its stream idle is sent at once; calls arriving while operations are
// in flight gather, and the answer to the last of those operations sends them (as RocksDB's write
// thread batches writers). Each caller waits only for its own answer, or its context.
//
// Operations that leave together, on any number of filters (one filter per user), are packed
// into one message (PipelineRequest.more, up to packedBytes) once the server's
// bloom-pipeline-more header says it reads them: a message costs the server more than a small
// operation, and the adds of one message share one RocksDB write. Counts go on a stream only
// once its bloom-pipeline-count header says the server takes them (older servers end the stream
// on one): until then a count is answered notSent, and the client makes the unary call.
//
// A merged operation failing with InvalidArgument or ResourceExhausted is retried one call at
// a time, so each call gets the answer it would get alone. A broken stream fails its
// unanswered calls with Unavailable (an add is idempotent: retry it; a remove is not, and may
// have been made), or with the server's Unauthenticated / PermissionDenied when it refused the
// token; the next call opens a new stream.
//
// Thread-safety: a coalescer may be used from many goroutines at once; each lane's state is
// guarded by its mu, and one goroutine at a time sends on a stream (sendMu).

package bloom

import (
	"context"
	"hash/fnv"
	"sync"

	bloomv1 "github.com/bloom-server/bloom-server/client/go/bloomv1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// packedBytes bounds the operations packed into one message (as the C++ and Python clients).
const packedBytes = 1 << 20

// pendingCall is one caller's Add, MightContain, Remove or Count waiting for its answer.
type pendingCall struct {
	add    bool
	remove bool // a Remove
	count  bool // a Count (a call with none of the three is a MightContain)
	name   string
	create *bloomv1.FilterSpec // an add's create_if_missing; nil: none
	absent bool                // a check's absent_if_missing
	items  [][]byte
	alone  bool // sent as its own operation (after a merged operation failed)

	once    sync.Once
	done    chan struct{}
	result  []bool
	counts  []uint32 // a count's answer
	notSent bool     // a count not sent: the stream's server has not said it takes counts
	err     error
}

func (p *pendingCall) answer(result []bool, err error) {
	p.once.Do(func() {
		p.result, p.err = result, err
		close(p.done)
	})
}

func (p *pendingCall) answerCounts(counts []uint32, notSent bool) {
	p.once.Do(func() {
		p.counts, p.notSent = counts, notSent
		close(p.done)
	})
}

// operationKey says which calls may share one operation: same kind, filter and options.
type operationKey struct {
	add    bool
	remove bool
	count  bool
	name   string
	create string // the serialized spec
	absent bool
}

func (p *pendingCall) key() operationKey {
	create := ""
	if p.create != nil {
		bytes, _ := proto.MarshalOptions{Deterministic: true}.Marshal(p.create)
		create = string(bytes)
	}
	return operationKey{p.add, p.remove, p.count, p.name, create, p.absent}
}

type operation struct {
	items int
	calls []*pendingCall // in item order
}

// lane is one Pipeline stream and the calls waiting for it or answered on it.
type lane struct {
	sequence  *sequence // raised by adds' answers, sent with checks
	stub      bloomv1.BloomFilterServiceClient
	maxItems  int
	withToken func(context.Context) context.Context

	sendMu sync.Mutex // one Send at a time on a stream

	mu       sync.Mutex
	waiting  []*pendingCall
	inFlight map[uint64]*operation
	sending  bool                                      // operations are in flight; the last answer sends what waits
	nextID   uint64                                    // also: operations sent so far + 1
	stream   bloomv1.BloomFilterService_PipelineClient // nil: no open stream
	cancel   context.CancelFunc
	packs    bool   // the open stream's server reads a request's `more`
	counts   bool   // the open stream's server takes counts
	messages uint64 // messages sent on this lane's streams (for tests)
}

type coalescer struct {
	lanes []*lane
}

func newCoalescer(stub bloomv1.BloomFilterServiceClient, maxItems, streams int,
	withToken func(context.Context) context.Context, seq *sequence) *coalescer {
	if streams < 1 {
		streams = 1
	}
	c := &coalescer{}
	for i := 0; i < streams; i++ {
		c.lanes = append(c.lanes, &lane{sequence: seq, stub: stub, maxItems: maxItems, withToken: withToken,
			inFlight: map[uint64]*operation{}, nextID: 1})
	}
	return c
}

// call sends p (coalesced with others) and waits for its answer or ctx.
func (c *coalescer) call(ctx context.Context, p *pendingCall) ([]bool, error) {
	if err := c.wait(ctx, p); err != nil {
		return nil, err
	}
	return p.result, p.err
}

// callCount sends a count; sent false: it was not (see above), make the unary call.
func (c *coalescer) callCount(ctx context.Context, name string,
	items [][]byte) (counts []uint32, sent bool, err error) {
	p := &pendingCall{count: true, name: name, items: items}
	if err := c.wait(ctx, p); err != nil {
		return nil, true, err
	}
	return p.counts, !p.notSent, p.err
}

func (c *coalescer) wait(ctx context.Context, p *pendingCall) error {
	p.done = make(chan struct{})
	h := fnv.New32a()
	h.Write([]byte(p.name))
	c.lanes[h.Sum32()%uint32(len(c.lanes))].submit(p)
	select {
	case <-p.done:
		return nil
	case <-ctx.Done():
		return status.FromContextError(ctx.Err()).Err()
	}
}

func (c *coalescer) close() {
	for _, l := range c.lanes {
		l.close()
	}
}

func (l *lane) submit(p *pendingCall) {
	l.mu.Lock()
	l.waiting = append(l.waiting, p)
	if l.sending {
		l.mu.Unlock()
		return
	}
	l.sending = true
	if l.stream == nil {
		if err := l.openLocked(); err != nil {
			calls := l.failAllLocked()
			l.mu.Unlock()
			for _, call := range calls {
				call.answer(nil, status.Errorf(codes.Unavailable, "opening a Pipeline stream: %v", err))
			}
			return
		}
	}
	stream, batch := l.stream, l.packLocked(l.takeBatchLocked())
	l.sending = len(l.inFlight) > 0 // every call may have been a count not sent
	l.mu.Unlock()
	l.send(stream, batch)
}

func (l *lane) close() {
	l.mu.Lock()
	cancel := l.cancel
	l.mu.Unlock()
	if cancel != nil {
		cancel() // the reader fails what is unanswered and marks the lane streamless
	}
}

func (l *lane) openLocked() error {
	ctx, cancel := context.WithCancel(l.withToken(context.Background()))
	stream, err := l.stub.Pipeline(ctx)
	if err != nil {
		cancel()
		return err
	}
	l.stream, l.cancel, l.packs, l.counts = stream, cancel, false, false
	go l.read(stream, cancel)
	return nil
}

// takeBatchLocked turns every waiting call into operations, one per run of calls that may
// share one (up to maxItems items), and records them in flight.
func (l *lane) takeBatchLocked() []*bloomv1.PipelineRequest {
	var batch []*bloomv1.PipelineRequest
	open := map[operationKey]*bloomv1.PipelineRequest{}
	for _, p := range l.waiting {
		if p.count && !l.counts {
			p.answerCounts(nil, true)
			continue
		}
		var request *bloomv1.PipelineRequest
		key := p.key()
		if !p.alone {
			request = open[key]
			if request != nil && l.inFlight[request.Id].items+len(p.items) > l.maxItems {
				request = nil
			}
		}
		if request == nil {
			request = &bloomv1.PipelineRequest{Id: l.nextID}
			l.nextID++
			if p.add {
				request.Op = &bloomv1.PipelineRequest_Add{Add: &bloomv1.AddRequest{
					Name: p.name, CreateIfMissing: p.create}}
			} else if p.remove {
				request.Op = &bloomv1.PipelineRequest_Remove{Remove: &bloomv1.RemoveRequest{Name: p.name}}
			} else if p.count {
				request.Op = &bloomv1.PipelineRequest_Count{Count: &bloomv1.CountRequest{
					Name: p.name, MinSequence: l.sequence.value.Load()}}
			} else {
				request.Op = &bloomv1.PipelineRequest_MightContain{MightContain: &bloomv1.MightContainRequest{
					Name: p.name, AbsentIfMissing: p.absent, MinSequence: l.sequence.value.Load()}}
			}
			batch = append(batch, request)
			l.inFlight[request.Id] = &operation{}
			if !p.alone {
				open[key] = request
			}
		}
		if p.add {
			add := request.GetAdd()
			add.RawItems = append(add.RawItems, p.items...)
		} else if p.remove {
			remove := request.GetRemove()
			remove.RawItems = append(remove.RawItems, p.items...)
		} else if p.count {
			count := request.GetCount()
			count.RawItems = append(count.RawItems, p.items...)
		} else {
			check := request.GetMightContain()
			check.RawItems = append(check.RawItems, p.items...)
		}
		op := l.inFlight[request.Id]
		op.items += len(p.items)
		op.calls = append(op.calls, p)
	}
	l.waiting = nil
	return batch
}

// packLocked turns a batch of operations into as few messages as the server reads: the first
// of each message carries the others in `more`, up to packedBytes.
func (l *lane) packLocked(batch []*bloomv1.PipelineRequest) []*bloomv1.PipelineRequest {
	if !l.packs || len(batch) < 2 {
		l.messages += uint64(len(batch))
		return batch
	}
	var messages []*bloomv1.PipelineRequest
	size := 0
	for _, request := range batch {
		requestSize := proto.Size(request)
		if len(messages) > 0 && size+requestSize <= packedBytes {
			head := messages[len(messages)-1]
			head.More = append(head.More, request)
			size += requestSize + 4 // its tag and length
			continue
		}
		messages = append(messages, request)
		size = requestSize
	}
	l.messages += uint64(len(messages))
	return messages
}

func (l *lane) send(stream bloomv1.BloomFilterService_PipelineClient, batch []*bloomv1.PipelineRequest) {
	l.sendMu.Lock()
	defer l.sendMu.Unlock()
	for _, request := range batch {
		if err := stream.Send(request); err != nil {
			return // the stream broke: its reader gets the status and fails the calls
		}
	}
}

// failAllLocked takes every unanswered call off the lane and marks it idle.
func (l *lane) failAllLocked() []*pendingCall {
	var calls []*pendingCall
	for _, op := range l.inFlight {
		calls = append(calls, op.calls...)
	}
	calls = append(calls, l.waiting...)
	l.inFlight, l.waiting, l.sending = map[uint64]*operation{}, nil, false
	return calls
}

func (l *lane) read(stream bloomv1.BloomFilterService_PipelineClient, cancel context.CancelFunc) {
	defer cancel()
	// The server's response headers say whether it reads `more` (an older server would ignore
	// the packed operations and never answer them) and takes counts (an older server ends the
	// stream on one). Until they arrive, nothing is packed and counts go unary. Servers send
	// them when the stream opens (those that predate bloom-pipeline-count: with the first
	// answer).
	if header, err := stream.Header(); err == nil {
		says := func(key string) bool {
			values := header.Get(key)
			return len(values) > 0 && values[0] == "1"
		}
		l.mu.Lock()
		if l.stream == stream {
			l.packs, l.counts = says("bloom-pipeline-more"), says("bloom-pipeline-count")
		}
		l.mu.Unlock()
	}
	var err error
	for {
		var response *bloomv1.PipelineResponse
		response, err = stream.Recv()
		if err != nil {
			break
		}
		// A packed message's answers come in one response: its own, then its `more`'s.
		more := response.More
		response.More = nil
		l.answer(stream, response)
		for _, part := range more {
			l.answer(stream, part)
		}
	}
	st := status.Convert(err)
	failure := status.Errorf(codes.Unavailable,
		"the Pipeline stream ended: %s (%s); an add may be retried, a remove may have been made",
		st.Message(), st.Code())
	if st.Code() == codes.Unauthenticated || st.Code() == codes.PermissionDenied {
		failure = st.Err()
	}
	l.mu.Lock()
	// Only this reader clears l.stream, so every call in flight or waiting is this stream's.
	l.stream, l.cancel = nil, nil
	calls := l.failAllLocked()
	l.mu.Unlock()
	for _, call := range calls {
		call.answer(nil, failure)
	}
}

func (l *lane) answer(stream bloomv1.BloomFilterService_PipelineClient, response *bloomv1.PipelineResponse) {
	var batch []*bloomv1.PipelineRequest
	l.mu.Lock()
	op, ok := l.inFlight[response.Id]
	if !ok {
		l.mu.Unlock()
		return
	}
	delete(l.inFlight, response.Id)
	calls := op.calls
	if e := response.GetError(); e != nil && len(calls) > 1 &&
		(codes.Code(e.Code) == codes.InvalidArgument || codes.Code(e.Code) == codes.ResourceExhausted) {
		for _, call := range calls {
			call.alone = true
		}
		l.waiting = append(l.waiting, calls...)
		calls = nil
	}
	if len(l.inFlight) == 0 {
		if len(l.waiting) > 0 {
			batch = l.packLocked(l.takeBatchLocked())
		}
		l.sending = len(l.inFlight) > 0
	}
	l.mu.Unlock()
	if len(batch) > 0 {
		l.send(stream, batch)
	}
	if e := response.GetError(); e != nil {
		failure := statusFromOperation(e)
		for _, call := range calls {
			call.answer(nil, failure)
		}
		return
	}
	if count := response.GetCount(); count != nil {
		splitAnswers(calls, count.Counts, func(call *pendingCall, counts []uint32) {
			call.answerCounts(counts, false)
		})
		return
	}
	var results []bool
	if add := response.GetAdd(); add != nil {
		l.sequence.observe(add.Sequence) // before the callers hear of their adds
		results = add.Added
	} else if remove := response.GetRemove(); remove != nil {
		l.sequence.observe(remove.Sequence)
		results = remove.Removed
	} else if check := response.GetMightContain(); check != nil {
		results = check.Present
	}
	splitAnswers(calls, results, func(call *pendingCall, answers []bool) { call.answer(answers, nil) })
}

// splitAnswers gives each of an operation's calls its own items' answers, in item order.
func splitAnswers[T any](calls []*pendingCall, answers []T, give func(*pendingCall, []T)) {
	start := 0
	for _, call := range calls {
		end := start + len(call.items)
		if end > len(answers) {
			call.answer(nil, status.Errorf(codes.Internal,
				"the server answered %d results for an operation of more items", len(answers)))
			continue
		}
		give(call, answers[start:end:end])
		start = end
	}
}
