package bloom

// Tests of the Go client against the real bloom-server (see server_test.go).

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"
	"google.golang.org/grpc/status"
)

var spec = Spec{Capacity: 10_000, ErrorRate: 0.001}

func dial(t *testing.T, target string, opts Options) *Client {
	t.Helper()
	client, err := Dial(target, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	return client
}

func wantCode(t *testing.T, err error, want codes.Code, what string) {
	t.Helper()
	if got := status.Code(err); got != want {
		t.Fatalf("%s: got %v (%v), want %v", what, got, err, want)
	}
}

func numbered(prefix string, n int) [][]byte {
	items := make([][]byte, n)
	for i := range items {
		items[i] = []byte(fmt.Sprintf("%s-%d", prefix, i))
	}
	return items
}

func TestWindowAndIdleTTL(t *testing.T) {
	server := startServer(t)
	client := dial(t, server.target, Options{})
	ctx := context.Background()
	windowed := Spec{Capacity: 1000, ErrorRate: 0.01, Window: 7 * 24 * time.Hour,
		IdleTTL: 30 * 24 * time.Hour}
	if created, err := client.Reserve(ctx, "go:seen", windowed); err != nil || !created {
		t.Fatalf("Reserve: %v %v", created, err)
	}
	windowed.WindowSlices = 8 // the default spelled out: the same spec
	if created, err := client.Reserve(ctx, "go:seen", windowed); err != nil || created {
		t.Fatalf("Reserve again: %v %v", created, err)
	}
	stats, err := client.Stats(ctx, "go:seen")
	if err != nil {
		t.Fatalf("Stats: %v", err)
	}
	if got := stats.GetSpec().GetWindow().AsDuration(); got != 7*24*time.Hour {
		t.Errorf("window %v", got)
	}
	if stats.GetExpiresAt() == nil || stats.GetWindowStart() == nil {
		t.Errorf("expires_at %v, window_start %v", stats.GetExpiresAt(), stats.GetWindowStart())
	}
	_, err = client.Reserve(ctx, "go:bad", Spec{Capacity: 10, ErrorRate: 0.01,
		Window: 500 * time.Millisecond})
	wantCode(t, err, codes.InvalidArgument, "Reserve with a 500 ms window")
}

func TestReserveAddCheckInBatchesStatsListDelete(t *testing.T) {
	server := startServer(t)
	client := dial(t, server.target, Options{BatchSize: 7}) // 50 items: 8 requests
	ctx := context.Background()
	created, err := client.Reserve(ctx, "go:users", spec)
	if err != nil || !created {
		t.Fatalf("Reserve: %v %v", created, err)
	}
	if created, err = client.Reserve(ctx, "go:users", spec); err != nil || created {
		t.Fatalf("Reserve again: %v %v", created, err)
	}
	items := numbered("user", 50)
	items = append(items, []byte{0, 0xff, '\n'}, []byte("ünïcødé"))
	added, err := client.Add(ctx, "go:users", items)
	if err != nil || len(added) != len(items) {
		t.Fatalf("Add: %v %v", added, err)
	}
	for i, a := range added {
		if !a {
			t.Errorf("item %d was not new", i)
		}
	}
	probe := append(append([][]byte{}, items...), numbered("stranger", 50)...)
	present, err := client.MightContain(ctx, "go:users", probe)
	if err != nil || len(present) != len(probe) {
		t.Fatalf("MightContain: %v %v", present, err)
	}
	strangers := 0
	for i, p := range present {
		if i < len(items) && !p {
			t.Errorf("added item %q reads absent", probe[i])
		}
		if i >= len(items) && p {
			strangers++
		}
	}
	if strangers > 3 { // 50 probes at 0.1%: more than 3 is a broken filter, not bad luck
		t.Errorf("%d of 50 never-added items read present", strangers)
	}
	stats, err := client.Stats(ctx, "go:users")
	if err != nil || stats.ItemsAdded != uint64(len(items)) || stats.Name != "go:users" {
		t.Fatalf("Stats: %v %v", stats, err)
	}
	for i := 0; i < 3; i++ {
		if _, err := client.Reserve(ctx, fmt.Sprintf("go:other-%d", i), spec); err != nil {
			t.Fatal(err)
		}
	}
	listed, err := client.List(ctx, "go:")
	if err != nil || len(listed) != 4 || listed[3].Name != "go:users" {
		t.Fatalf("List: %v %v", listed, err)
	}
	if err := client.Delete(ctx, "go:users"); err != nil {
		t.Fatal(err)
	}
	_, err = client.Stats(ctx, "go:users")
	wantCode(t, err, codes.NotFound, "Stats after Delete")
}

func TestErrorsKeepTheServersCodesAndMessages(t *testing.T) {
	server := startServer(t)
	client := dial(t, server.target, Options{})
	ctx := context.Background()
	_, err := client.MightContain(ctx, "go:missing", Strings("a"))
	wantCode(t, err, codes.NotFound, "MightContain of a missing filter")
	_, err = client.Reserve(ctx, "bad name!", spec)
	wantCode(t, err, codes.InvalidArgument, "Reserve with a bad name")
	if !strings.Contains(status.Convert(err).Message(), "name") {
		t.Errorf("the message should name the field: %v", err)
	}
	_, err = client.Reserve(ctx, "go:f", Spec{Capacity: 10, ErrorRate: 1.5})
	wantCode(t, err, codes.InvalidArgument, "Reserve with error_rate 1.5")
	if _, err := client.Reserve(ctx, "go:f", spec); err != nil {
		t.Fatal(err)
	}
	_, err = client.Reserve(ctx, "go:f", Spec{Capacity: 99, ErrorRate: 0.01})
	wantCode(t, err, codes.AlreadyExists, "Reserve with another spec")
	_, err = client.Add(ctx, "go:f", nil)
	wantCode(t, err, codes.InvalidArgument, "Add of no items")
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_, err = client.Add(cancelled, "go:f", Strings("a"))
	wantCode(t, err, codes.Canceled, "Add with a cancelled context")

	// absent_if_missing: all absent, and nothing is created.
	present, err := client.MightContainOrAbsent(ctx, "go:user-42", Strings("a", "b"))
	if err != nil || len(present) != 2 || present[0] || present[1] {
		t.Fatalf("MightContainOrAbsent: %v %v", present, err)
	}
	_, err = client.Stats(ctx, "go:user-42")
	wantCode(t, err, codes.NotFound, "Stats of a filter only checked with absent_if_missing")
	// AddOrCreate creates it.
	if _, err := client.AddOrCreate(ctx, "go:user-42", spec, Strings("a")); err != nil {
		t.Fatal(err)
	}
	present, err = client.MightContainOrAbsent(ctx, "go:user-42", Strings("a", "b"))
	if err != nil || !present[0] {
		t.Fatalf("after AddOrCreate: %v %v", present, err)
	}
}

func TestExportThenImportAnswersAlike(t *testing.T) {
	server := startServer(t)
	client := dial(t, server.target, Options{})
	ctx := context.Background()
	items := numbered("x", 5000)
	if _, err := client.AddOrCreate(ctx, "go:src", spec, items); err != nil {
		t.Fatal(err)
	}
	var dump bytes.Buffer
	if err := client.Export(ctx, "go:src", &dump); err != nil {
		t.Fatal(err)
	}
	stats, err := client.Import(ctx, "go:copy", bytes.NewReader(dump.Bytes()))
	if err != nil || stats.Name != "go:copy" || stats.ItemsAdded != 5000 {
		t.Fatalf("Import: %v %v", stats, err)
	}
	probe := append(items[:100:100], numbered("y", 2000)...)
	want, err := client.MightContain(ctx, "go:src", probe)
	if err != nil {
		t.Fatal(err)
	}
	got, err := client.MightContain(ctx, "go:copy", probe)
	if err != nil {
		t.Fatal(err)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("item %q: the copy says %v, the original %v", probe[i], got[i], want[i])
		}
	}
	_, err = client.Import(ctx, "go:bad", bytes.NewReader(dump.Bytes()[:dump.Len()/2]))
	if status.Code(err) != codes.InvalidArgument && status.Code(err) != codes.DataLoss {
		t.Fatalf("Import of half a dump: %v", err)
	}
	_, err = client.Stats(ctx, "go:bad")
	wantCode(t, err, codes.NotFound, "a failed Import creates nothing")
}

// Two filters made alike merge into a third; one not made alike is refused.
func TestReserveLikeAndMerge(t *testing.T) {
	server := startServer(t)
	client := dial(t, server.target, Options{})
	ctx := context.Background()
	if _, err := client.Reserve(ctx, "go:all", spec); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"go:shard-1", "go:shard-2"} {
		if created, err := client.ReserveLike(ctx, name, "go:all"); err != nil || !created {
			t.Fatalf("ReserveLike %s: %v %v", name, created, err)
		}
	}
	one, two := numbered("one", 300), numbered("two", 300)
	if _, err := client.Add(ctx, "go:shard-1", one); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Add(ctx, "go:shard-2", two); err != nil {
		t.Fatal(err)
	}
	stats, err := client.Merge(ctx, "go:all", "go:shard-1", "go:shard-2")
	if err != nil || stats.ItemsAdded != 600 {
		t.Fatalf("Merge: %v %v", stats, err)
	}
	present, err := client.MightContain(ctx, "go:all", append(one, two...))
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range present {
		if !p {
			t.Fatalf("item %d of the sources is absent from the union", i)
		}
	}
	// A dump ORed into the existing filter of its name (as from another server).
	if _, err := client.ReserveLike(ctx, "go:shard-3", "go:all"); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Add(ctx, "go:shard-3", Strings("three")); err != nil {
		t.Fatal(err)
	}
	var dump bytes.Buffer
	if err := client.Export(ctx, "go:shard-3", &dump); err != nil {
		t.Fatal(err)
	}
	if stats, err := client.ImportMerging(ctx, "go:all", &dump); err != nil || stats.ItemsAdded != 601 {
		t.Fatalf("ImportMerging: %v %v", stats, err)
	}
	if _, err := client.Reserve(ctx, "go:stranger", spec); err != nil {
		t.Fatal(err)
	}
	_, err = client.Merge(ctx, "go:all", "go:stranger")
	wantCode(t, err, codes.FailedPrecondition, "a filter not made alike")
}

func TestCuckooRemoveAndCount(t *testing.T) {
	server := startServer(t)
	client := dial(t, server.target, Options{})
	ctx := context.Background()
	cuckoo := Spec{Capacity: 1000, ErrorRate: 0.01, Cuckoo: true}
	if _, err := client.Reserve(ctx, "go:blocked", cuckoo); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Add(ctx, "go:blocked", Strings("a", "b", "b")); err != nil {
		t.Fatal(err)
	}
	counts, err := client.Count(ctx, "go:blocked", Strings("a", "b", "z"))
	if err != nil || fmt.Sprint(counts) != "[1 2 0]" {
		t.Fatalf("Count: %v %v", counts, err)
	}
	removed, err := client.Remove(ctx, "go:blocked", Strings("a", "z"))
	if err != nil || fmt.Sprint(removed) != "[true false]" {
		t.Fatalf("Remove: %v %v", removed, err)
	}
	present, err := client.MightContain(ctx, "go:blocked", Strings("a", "b"))
	if err != nil || fmt.Sprint(present) != "[false true]" {
		t.Fatalf("MightContain: %v %v", present, err)
	}
	stats, err := client.Stats(ctx, "go:blocked")
	if err != nil || stats.Spec.Kind.String() != "FILTER_KIND_CUCKOO" || stats.ItemsAdded != 2 {
		t.Fatalf("Stats: %v %v", stats, err)
	}
	if _, err := client.AddOrCreate(ctx, "go:feed", cuckoo, Strings("x")); err != nil {
		t.Fatal(err)
	}
	if counts, err := client.Count(ctx, "go:feed", Strings("x")); err != nil || counts[0] != 1 {
		t.Fatalf("Count after AddOrCreate: %v %v", counts, err)
	}
	if _, err := client.Reserve(ctx, "go:plain", spec); err != nil {
		t.Fatal(err)
	}
	_, err = client.Remove(ctx, "go:plain", Strings("a"))
	wantCode(t, err, codes.FailedPrecondition, "Remove on a Bloom filter")
}

// Many goroutines' single-key calls share one stream and go out as fewer operations.
func TestPipelinedModeCoalescesConcurrentCalls(t *testing.T) {
	server := startServer(t)
	client := dial(t, server.target, Options{Pipelined: true})
	ctx := context.Background()
	if _, err := client.Reserve(ctx, "go:feed", Spec{Capacity: 100_000, ErrorRate: 0.01}); err != nil {
		t.Fatal(err)
	}
	const goroutines, perGoroutine = 64, 50
	addThenCheck(t, goroutines, perGoroutine, func(g, i int) (string, [][]byte) {
		return "go:feed", Strings(fmt.Sprintf("g%d-%d", g, i))
	}, client.Add, client.MightContain)
	lane := client.coalescer.lanes[0]
	lane.mu.Lock()
	operations := lane.nextID - 1
	lane.mu.Unlock()
	calls := uint64(goroutines * perGoroutine * 2)
	t.Logf("%d calls went out as %d operations", calls, operations)
	if operations >= calls {
		t.Errorf("%d calls went out as %d operations: nothing was coalesced", calls, operations)
	}
	stats, err := client.Stats(ctx, "go:feed")
	if err != nil || stats.ItemsAdded != goroutines*perGoroutine {
		t.Fatalf("Stats: %v %v", stats, err)
	}
}

// Removes from a cuckoo filter coalesce too: each caller hears whether its own item was removed,
// and of two goroutines removing an item held once, exactly one removes it.
func TestPipelinedRemovesCoalesceAndRemoveEachCopyOnce(t *testing.T) {
	server := startServer(t)
	client := dial(t, server.target, Options{Pipelined: true})
	ctx := context.Background()
	// An error rate of 1e-6: removing an item no longer held finds no other item's fingerprint.
	spec := Spec{Capacity: 100_000, ErrorRate: 1e-6, Cuckoo: true}
	if _, err := client.Reserve(ctx, "go:unfollow", spec); err != nil {
		t.Fatal(err)
	}
	const goroutines, perGoroutine, shared = 32, 20, 64
	var all [][]byte
	for g := 0; g < goroutines; g++ {
		for i := 0; i < perGoroutine; i++ {
			all = append(all, []byte(fmt.Sprintf("g%d-%d", g, i)))
		}
	}
	for k := 0; k < shared; k++ {
		all = append(all, []byte(fmt.Sprintf("shared-%d", k)))
	}
	if _, err := client.Add(ctx, "go:unfollow", all); err != nil {
		t.Fatal(err)
	}
	lane := client.coalescer.lanes[0]
	lane.mu.Lock()
	before := lane.nextID
	lane.mu.Unlock()
	var removedShared [shared]atomic.Int32
	inGoroutines(t, goroutines, func(g int) error {
		for i := 0; i < perGoroutine; i++ {
			removed, err := client.Remove(ctx, "go:unfollow", Strings(fmt.Sprintf("g%d-%d", g, i)))
			if err != nil || len(removed) != 1 || !removed[0] {
				return fmt.Errorf("g%d-%d: removed %v, %v", g, i, removed, err)
			}
			// Goroutines g and g + 1 race for each shared item k with k % goroutines == g.
			for _, owner := range []int{g, (g + goroutines - 1) % goroutines} {
				k := owner + i*goroutines
				if k >= shared {
					continue
				}
				removed, err := client.Remove(ctx, "go:unfollow", Strings(fmt.Sprintf("shared-%d", k)))
				if err != nil || len(removed) != 1 {
					return fmt.Errorf("shared-%d: %v %v", k, removed, err)
				}
				if removed[0] {
					removedShared[k].Add(1)
				}
			}
		}
		return nil
	})
	for k := range removedShared {
		if n := removedShared[k].Load(); n != 1 {
			t.Errorf("shared-%d was removed %d times", k, n)
		}
	}
	lane.mu.Lock()
	operations := lane.nextID - before
	lane.mu.Unlock()
	calls := uint64(goroutines*perGoroutine + 2*shared)
	t.Logf("%d removes went out as %d operations", calls, operations)
	if operations == 0 || operations >= calls {
		t.Errorf("%d removes went out as %d operations: nothing was coalesced", calls, operations)
	}
	present, err := client.MightContain(ctx, "go:unfollow", all[:goroutines*perGoroutine])
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range present {
		if p {
			t.Errorf("%s reads present after its removal", all[i])
		}
	}
}

// Counts go on the stream once its headers say the server takes them (a fresh client's first
// count goes unary, since its stream is not open yet), and each caller gets its own counts,
// after the adds it made before.
func TestPipelinedCountsTravelOnTheStreamEachWithItsOwnCounts(t *testing.T) {
	server := startServer(t)
	client := dial(t, server.target, Options{Pipelined: true})
	ctx := context.Background()
	if _, err := client.Reserve(ctx, "go:counted", Spec{Capacity: 100_000, ErrorRate: 1e-6, Cuckoo: true}); err != nil {
		t.Fatal(err)
	}
	lane := client.coalescer.lanes[0]
	// The first count opens the stream and goes unary; the stream's headers come at once.
	if counts, err := client.Count(ctx, "go:counted", Strings("none")); err != nil || counts[0] != 0 {
		t.Fatalf("first count: %v %v", counts, err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		lane.mu.Lock()
		counts := lane.counts
		lane.mu.Unlock()
		if counts {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the server's bloom-pipeline-count header was not seen")
		}
		time.Sleep(10 * time.Millisecond)
	}
	const goroutines, perGoroutine = 16, 20
	inGoroutines(t, goroutines, func(g int) error {
		for i := 0; i < perGoroutine; i++ {
			item := fmt.Sprintf("g%d-%d", g, i)
			for copy := 0; copy < i%3; copy++ {
				if _, err := client.Add(ctx, "go:counted", Strings(item)); err != nil {
					return err
				}
			}
			counts, err := client.Count(ctx, "go:counted", Strings(item, fmt.Sprintf("absent-%d-%d", g, i)))
			if err != nil || len(counts) != 2 || counts[0] != uint32(i%3) || counts[1] != 0 {
				return fmt.Errorf("%s: counts %v, %v", item, counts, err)
			}
		}
		return nil
	})
	// One count now is one operation on the stream (nextID counts them), not a unary call.
	lane.mu.Lock()
	before := lane.nextID
	lane.mu.Unlock()
	if counts, err := client.Count(ctx, "go:counted", Strings("g0-1")); err != nil || len(counts) != 1 || counts[0] != 1 {
		t.Errorf("g0-1: counts %v, %v", counts, err)
	}
	lane.mu.Lock()
	after := lane.nextID
	lane.mu.Unlock()
	if after != before+1 {
		t.Errorf("a count went out as %d operations on the stream, want 1", after-before)
	}
	_, err := client.Count(ctx, "go:missing", Strings("x"))
	wantCode(t, err, codes.NotFound, "a count of a missing filter")
}

// One filter per user: calls on many filters that wait together leave in one message (`more`),
// and each caller still gets its own answer.
func TestPipelinedCallsOnManyFiltersPackIntoFewMessages(t *testing.T) {
	server := startServer(t)
	client := dial(t, server.target, Options{Pipelined: true})
	plain := dial(t, server.target, Options{})
	ctx := context.Background()
	perUser := Spec{Capacity: 1000, ErrorRate: 0.01}
	const goroutines, calls = 16, 40
	addOrCreate := func(ctx context.Context, name string, items [][]byte) ([]bool, error) {
		return client.AddOrCreate(ctx, name, perUser, items)
	}
	addThenCheck(t, goroutines, calls, func(g, i int) (string, [][]byte) {
		return fmt.Sprintf("go-pp:user-%d-%d", g, i%7), Strings(fmt.Sprintf("seen-%d", i))
	}, addOrCreate, client.MightContainOrAbsent)
	lane := client.coalescer.lanes[0]
	lane.mu.Lock()
	packs, messages, operations := lane.packs, lane.messages, lane.nextID-1
	lane.mu.Unlock()
	t.Logf("%d calls went out as %d operations in %d messages", goroutines*calls*2, operations, messages)
	if !packs {
		t.Error("the server's bloom-pipeline-more header was not seen")
	}
	if messages >= operations {
		t.Errorf("%d operations went out as %d messages: nothing was packed", operations, messages)
	}
	for g := 0; g < goroutines; g++ {
		for i := 0; i < calls; i++ {
			name := fmt.Sprintf("go-pp:user-%d-%d", g, i%7)
			present, err := plain.MightContain(ctx, name, Strings(fmt.Sprintf("seen-%d", i)))
			if err != nil || !present[0] {
				t.Fatalf("%s lost seen-%d: %v %v", name, i, present, err)
			}
		}
	}
}

type itemsCall func(ctx context.Context, name string, items [][]byte) ([]bool, error)

// addThenCheck runs `goroutines` goroutines that each make `calls` pairs of calls: add the
// item target(g, i) names, then check it, which must read present. Fails t on any error.
func addThenCheck(t *testing.T, goroutines, calls int, target func(g, i int) (string, [][]byte),
	add, check itemsCall) {
	t.Helper()
	ctx := context.Background()
	inGoroutines(t, goroutines, func(g int) error {
		for i := 0; i < calls; i++ {
			name, item := target(g, i)
			added, err := add(ctx, name, item)
			if err != nil || len(added) != 1 {
				return fmt.Errorf("add to %s: %v %v", name, added, err)
			}
			present, err := check(ctx, name, item)
			if err != nil || !present[0] {
				return fmt.Errorf("an acknowledged add reads absent in %s: %v %v", name, present, err)
			}
		}
		return nil
	})
}

// inGoroutines runs work(0) ... work(n - 1) in goroutines of their own, waits for all of them,
// and fails t with each error they returned.
func inGoroutines(t *testing.T, n int, work func(g int) error) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for g := 0; g < n; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			if err := work(g); err != nil {
				errs <- err
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		t.FailNow()
	}
}

// A call that would fail alone fails alone, even when merged with others.
func TestPipelinedErrorsStayWithTheirCall(t *testing.T) {
	server := startServer(t, "--max_item_bytes=100")
	client := dial(t, server.target, Options{Pipelined: true})
	ctx := context.Background()
	if _, err := client.Reserve(ctx, "go:f", spec); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	results := make([]error, 40)
	for i := range results {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			item := []byte(fmt.Sprintf("item-%d", i))
			if i%10 == 3 {
				item = bytes.Repeat([]byte("x"), 101)
			}
			_, results[i] = client.Add(ctx, "go:f", [][]byte{item})
		}(i)
	}
	wg.Wait()
	for i, err := range results {
		if i%10 == 3 {
			wantCode(t, err, codes.InvalidArgument, fmt.Sprintf("call %d (oversized item)", i))
		} else if err != nil {
			t.Errorf("call %d: %v", i, err)
		}
	}
	_, err := client.MightContain(ctx, "go:nope", Strings("a"))
	wantCode(t, err, codes.NotFound, "pipelined check of a missing filter")
	present, err := client.MightContainOrAbsent(ctx, "go:nope", Strings("a"))
	if err != nil || present[0] {
		t.Fatalf("pipelined MightContainOrAbsent: %v %v", present, err)
	}
}

// A server that dies fails the unanswered calls with UNAVAILABLE; none hangs.
func TestPipelinedBrokenStreamFailsCallsUnavailable(t *testing.T) {
	server := startServer(t)
	client := dial(t, server.target, Options{Pipelined: true, Timeout: 20 * time.Second})
	ctx := context.Background()
	if _, err := client.AddOrCreate(ctx, "go:f", spec, Strings("a")); err != nil {
		t.Fatal(err)
	}
	server.kill()
	start := time.Now()
	_, err := client.Add(ctx, "go:f", Strings("b"))
	wantCode(t, err, codes.Unavailable, "Add after the server died")
	if waited := time.Since(start); waited > 15*time.Second {
		t.Errorf("the call waited %v for a dead server", waited)
	}
	// The next call opens a new stream, and what was acknowledged before the crash is there.
	server.restart(t)
	deadline := time.Now().Add(15 * time.Second)
	for {
		present, err := client.MightContain(ctx, "go:f", Strings("a"))
		if err == nil {
			if !present[0] {
				t.Fatal("an add acknowledged before kill -9 reads absent")
			}
			break
		}
		if status.Code(err) != codes.Unavailable || time.Now().After(deadline) {
			t.Fatalf("after the restart: %v", err)
		}
		time.Sleep(50 * time.Millisecond) // gRPC reconnects with backoff
	}
}

func TestTlsAndTokensWithRoles(t *testing.T) {
	certFile, keyFile, tlsConfig := selfSigned(t)
	server := startServer(t, "--tls_cert_file="+certFile, "--tls_key_file="+keyFile,
		"--auth_token_file="+tokenFile(t, "s3cret-token"))
	ctx := context.Background()
	for _, pipelined := range []bool{false, true} {
		name := fmt.Sprintf("go:pipelined-%v", pipelined)
		writer := dial(t, server.target, Options{TLS: tlsConfig, Token: "s3cret-token", Pipelined: pipelined})
		if _, err := writer.AddOrCreate(ctx, name, spec, Strings("a")); err != nil {
			t.Fatalf("pipelined=%v: the write token over TLS: %v", pipelined, err)
		}
		reader := dial(t, server.target, Options{TLS: tlsConfig, Token: "s3cret-token-r", Pipelined: pipelined})
		present, err := reader.MightContain(ctx, name, Strings("a"))
		if err != nil || !present[0] {
			t.Fatalf("pipelined=%v: the read token's check: %v %v", pipelined, present, err)
		}
		_, err = reader.Add(ctx, name, Strings("b"))
		wantCode(t, err, codes.PermissionDenied, "an add with a read token")
		stranger := dial(t, server.target, Options{TLS: tlsConfig, Pipelined: pipelined})
		_, err = stranger.MightContain(ctx, name, Strings("a"))
		wantCode(t, err, codes.Unauthenticated, "a call without a token")
	}
	plaintext := dial(t, server.target, Options{Token: "s3cret-token", Timeout: 3 * time.Second})
	_, err := plaintext.Stats(ctx, "go:pipelined-false")
	wantCode(t, err, codes.Unavailable, "a plaintext call to a TLS server")
}

// A target naming several servers spreads the calls over them, and one killed under the client
// is skipped at once. The addresses come from a manual resolver here, as a headless Service's
// "dns:///" name would give them; the servers are independent, each with its own filter.
func TestSeveralServersShareTheCallsAndAKilledOneIsSkipped(t *testing.T) {
	ctx := context.Background()
	servers := []*testServer{startServer(t), startServer(t)}
	pods, unregister := manual.GenerateAndRegisterManualResolver()
	t.Cleanup(unregister)
	var addresses []resolver.Address
	for _, server := range servers {
		direct := dial(t, server.target, Options{})
		if _, err := direct.AddOrCreate(ctx, "go:f", spec, [][]byte{[]byte("x")}); err != nil {
			t.Fatal(err)
		}
		addresses = append(addresses, resolver.Address{Addr: server.target})
	}
	pods.InitialState(resolver.State{Addresses: addresses})
	client := dial(t, pods.Scheme()+":///pods", Options{Timeout: 5 * time.Second})
	for i := 0; i < 20; i++ {
		got, err := client.MightContain(ctx, "go:f", [][]byte{[]byte("x"), []byte("y")})
		if err != nil || !got[0] || got[1] {
			t.Fatalf("call %d: %v %v", i, got, err)
		}
	}
	for _, server := range servers {
		stats, err := dial(t, server.target, Options{}).Stats(ctx, "go:f")
		if err != nil {
			t.Fatal(err)
		}
		if stats.Checks == 0 {
			t.Errorf("%s served no check", server.target)
		}
	}
	servers[0].kill()
	// grpc-go does not retry reads: wait until the closed connection has left the rotation (a
	// call answers), then every call must.
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, err := client.MightContain(ctx, "go:f", [][]byte{[]byte("x")}); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no call answered within 5 s of a server being killed")
		}
		time.Sleep(10 * time.Millisecond)
	}
	for i := 0; i < 20; i++ {
		got, err := client.MightContain(ctx, "go:f", [][]byte{[]byte("x")})
		if err != nil || !got[0] {
			t.Fatalf("call %d after a server was killed: %v %v", i, got, err)
		}
	}
}
