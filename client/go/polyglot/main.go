// polyglot: the Go side of tests/polyglot_test.cc, where the C++, Python, Go and Node.js
// clients add and check the same items in one filter and must agree on every answer.
//
//	polyglot TARGET FILTER add|add-pipelined|check|check-pipelined < ITEMS
//	polyglot WRITER,READER FILTER read-your-writes[-pipelined] < ITEMS
//	polyglot TARGET FILTER cuckoo-add|remove|count < ITEMS
//
// read-your-writes adds each item through WRITER, hands the writer's last sequence to a client
// of READER (another pod), and prints whether READER answers it present
// (tests/replication_test.cc). cuckoo-add adds to a CUCKOO filter (created if missing), remove
// prints 1 or 0 per item removed, count the copies held of each item.
//
// ITEMS is one hex-encoded item per line (an item is its bytes, whatever the language).
// Prints one line per item: 1 (added / present) or 0. In the -pipelined modes every item is
// its own concurrent call (coalesced by the client). Exit 1 with the status on stderr on an
// error.
package main

import (
	"bufio"
	"context"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/bloom-server/bloom-server/client/go/bloom"
)

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: polyglot TARGET FILTER add|add-pipelined|check|check-pipelined < ITEMS")
		os.Exit(2)
	}
	target, filter, mode := os.Args[1], os.Args[2], os.Args[3]
	var items [][]byte
	scanner := bufio.NewScanner(os.Stdin)
	scanner.Buffer(make([]byte, 1<<20), 1<<20)
	for scanner.Scan() {
		item, err := hex.DecodeString(strings.TrimSpace(scanner.Text()))
		if err != nil {
			fmt.Fprintln(os.Stderr, "bad hex item:", err)
			os.Exit(2)
		}
		items = append(items, item)
	}
	if strings.HasPrefix(mode, "read-your-writes") {
		readYourWrites(target, filter, items, strings.HasSuffix(mode, "-pipelined"))
		return
	}
	if mode == "cuckoo-add" || mode == "remove" || mode == "count" {
		cuckoo(target, filter, mode, items)
		return
	}
	client, err := bloom.Dial(target, bloom.Options{Pipelined: strings.HasSuffix(mode, "-pipelined")})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer client.Close()
	ctx := context.Background()
	call := func(batch [][]byte) ([]bool, error) {
		if strings.HasPrefix(mode, "add") {
			return client.AddOrCreate(ctx, filter, bloom.Spec{Capacity: 10_000, ErrorRate: 0.001}, batch)
		}
		return client.MightContain(ctx, filter, batch)
	}
	results := make([]bool, len(items))
	if strings.HasSuffix(mode, "-pipelined") { // every item its own concurrent call
		var wg sync.WaitGroup
		errs := make([]error, len(items))
		for i := range items {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				var answer []bool
				if answer, errs[i] = call(items[i : i+1]); errs[i] == nil {
					results[i] = answer[0]
				}
			}(i)
		}
		wg.Wait()
		for _, e := range errs {
			if e != nil {
				err = e
			}
		}
	} else {
		results, err = call(items)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	out := bufio.NewWriter(os.Stdout)
	for _, r := range results {
		if r {
			out.WriteString("1\n")
		} else {
			out.WriteString("0\n")
		}
	}
	out.Flush()
}

func readYourWrites(targets, filter string, items [][]byte, pipelined bool) {
	pods := strings.Split(targets, ",")
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	writer, err := bloom.Dial(pods[0], bloom.Options{Pipelined: pipelined})
	if err != nil {
		fail(err)
	}
	defer writer.Close()
	reader, err := bloom.Dial(pods[1], bloom.Options{Pipelined: pipelined})
	if err != nil {
		fail(err)
	}
	defer reader.Close()
	ctx := context.Background()
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	for _, item := range items {
		if _, err := writer.AddOrCreate(ctx, filter, bloom.Spec{Capacity: 10_000, ErrorRate: 0.001}, [][]byte{item}); err != nil {
			fail(err)
		}
		reader.ObserveSequence(writer.LastSequence())
		present, err := reader.MightContain(ctx, filter, [][]byte{item})
		if err != nil {
			fail(err)
		}
		if present[0] {
			fmt.Fprintln(out, "1")
		} else {
			fmt.Fprintln(out, "0")
		}
	}
}

// cuckoo serves the CUCKOO filter modes: one call for all the items.
func cuckoo(target, filter, mode string, items [][]byte) {
	client, err := bloom.Dial(target, bloom.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer client.Close()
	ctx := context.Background()
	var lines []string
	switch mode {
	case "cuckoo-add", "remove":
		var results []bool
		if mode == "remove" {
			results, err = client.Remove(ctx, filter, items)
		} else {
			results, err = client.AddOrCreate(ctx, filter,
				bloom.Spec{Capacity: 10_000, ErrorRate: 0.001, Cuckoo: true}, items)
		}
		for _, r := range results {
			if r {
				lines = append(lines, "1")
			} else {
				lines = append(lines, "0")
			}
		}
	default:
		var counts []uint32
		counts, err = client.Count(ctx, filter, items)
		for _, c := range counts {
			lines = append(lines, fmt.Sprint(c))
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Print(strings.Join(lines, "\n") + "\n")
}
