package bloom

// Shard routing (Options.ShardRouting) against a real sharded deployment: a real etcd (the etcd
// and etcdctl programs) and two bloom-server groups of one pod each, the map written by etcdctl.

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	bloomv1 "github.com/bloom-server/bloom-server/client/go/bloomv1"
)

const testSlots = 64

func TestSlotsAreTheServersOwn(t *testing.T) {
	// The values of the server's common/slot_test.cc and the other clients' tests.
	for _, c := range []struct {
		name  string
		slots uint32
		want  uint32
	}{{"123456789", 4096, 2342}, {"user:1", 4096, 0x7BA5C282 % 4096}, {"", 4096, 0},
		{"anything", 1, 0}, {"é", 4096, 3390}} {
		if got := SlotOf(c.name, c.slots); got != c.want {
			t.Errorf("SlotOf(%q, %d) = %d, want %d", c.name, c.slots, got, c.want)
		}
	}
	for name, part := range map[string]string{"feed:{user42}:seen": "user42", "x{}y": "x{}y",
		"a{{b}c": "{b"} {
		if got := string(HashedPart(name)); got != part {
			t.Errorf("HashedPart(%q) = %q, want %q", name, got, part)
		}
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func waitUntil(t *testing.T, what string, done func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !done() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// startDeployment runs etcd with a map of two groups, and a pod of each; answers the pods.
func startDeployment(t *testing.T) []*testServer {
	t.Helper()
	dir := t.TempDir()
	client, peer := freePort(t), freePort(t)
	endpoint := fmt.Sprintf("127.0.0.1:%d", client)
	etcd := exec.Command("etcd", "--data-dir="+filepath.Join(dir, "etcd"),
		"--listen-client-urls=http://"+endpoint, "--advertise-client-urls=http://"+endpoint,
		fmt.Sprintf("--listen-peer-urls=http://127.0.0.1:%d", peer),
		fmt.Sprintf("--initial-advertise-peer-urls=http://127.0.0.1:%d", peer),
		fmt.Sprintf("--initial-cluster=default=http://127.0.0.1:%d", peer), "--log-level=error")
	if err := etcd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { etcd.Process.Kill(); etcd.Wait() })
	etcdctl := func(args ...string) error {
		cmd := exec.Command("etcdctl", append([]string{"--endpoints=" + endpoint}, args...)...)
		cmd.Env = append(os.Environ(), "ETCDCTL_API=3")
		return cmd.Run()
	}
	waitUntil(t, "etcd", func() bool { return etcdctl("endpoint", "health") == nil })
	groups := []string{"go-shards/a", "go-shards/b"}
	record := fmt.Sprintf("format=1 version=1 slots=%d groups=%s,%s owners=%s:0-%d,%s:%d-%d",
		testSlots, groups[0], groups[1], groups[0], testSlots/2-1, groups[1], testSlots/2, testSlots-1)
	if err := etcdctl("put", "go-shards/shardmap", record); err != nil {
		t.Fatal(err)
	}
	var pods []*testServer
	for _, group := range groups {
		port := freePort(t)
		address := fmt.Sprintf("127.0.0.1:%d", port)
		pods = append(pods, startServerOn(t, address, "--advertise_address="+address,
			"--etcd_endpoints="+endpoint, "--cluster="+group, "--shard_map=go-shards/shardmap",
			"--leader_ttl=2s"))
	}
	for _, pod := range pods {
		c, err := Dial(pod.target, Options{Timeout: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		waitUntil(t, pod.target+" to know both primaries", func() bool {
			resp, err := c.stub.GetShardMap(context.Background(), &bloomv1.GetShardMapRequest{})
			if err != nil || len(resp.GetMap().GetGroups()) != 2 {
				return false
			}
			for _, g := range resp.GetMap().GetGroups() {
				if g.GetPrimary() == "" {
					return false
				}
			}
			return true
		})
		c.Close()
	}
	return pods
}

// nameIn is a name with prefix whose slot group (0: a, 1: b) owns.
func nameIn(group int, prefix string) string {
	for n := 0; ; n++ {
		name := fmt.Sprintf("%s%d", prefix, n)
		if int(SlotOf(name, testSlots)/(testSlots/2)) == group {
			return name
		}
	}
}

func TestShardRoutingSendsCallsStraightToTheOwningGroup(t *testing.T) {
	pods := startDeployment(t)
	ctx := context.Background()
	for _, pipelined := range []bool{false, true} {
		c, err := Dial(pods[0].target, Options{ShardRouting: true, Pipelined: pipelined,
			Timeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if c.ShardMapVersion() != 1 {
			t.Fatalf("shard map version %d, want 1", c.ShardMapVersion())
		}
		inA := nameIn(0, fmt.Sprintf("go-direct-%v-", pipelined))
		inB := nameIn(1, fmt.Sprintf("go-direct-%v-", pipelined))
		for _, name := range []string{inA, inB} {
			if _, err := c.Reserve(ctx, name, Spec{Capacity: 1000, ErrorRate: 0.01}); err != nil {
				t.Fatal(name, err)
			}
		}
		// With the seed (group a's pod) stopped, group b's filters are still reached.
		pods[0].cmd.Process.Signal(syscall.SIGSTOP)
		added, err := c.Add(ctx, inB, Strings("x", "y"))
		present, err2 := c.MightContain(ctx, inB, Strings("x", "z"))
		stats, err3 := c.Stats(ctx, inB)
		pods[0].cmd.Process.Signal(syscall.SIGCONT)
		if err != nil || err2 != nil || err3 != nil {
			t.Fatalf("pipelined=%v: %v, %v, %v", pipelined, err, err2, err3)
		}
		if !added[0] || !added[1] || !present[0] || present[1] || stats.ItemsAdded != 2 {
			t.Errorf("pipelined=%v: added %v, present %v, items %d", pipelined, added, present,
				stats.ItemsAdded)
		}
		if present, err := c.MightContain(ctx, inA, Strings("x")); err != nil || present[0] {
			t.Errorf("pipelined=%v: group a's filter: %v, %v", pipelined, present, err)
		}
		c.Close()
	}
	// Against an unsharded server, everything goes to it.
	plain := startServer(t)
	c, err := Dial(plain.target, Options{ShardRouting: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.ShardMapVersion() != 0 {
		t.Errorf("an unsharded server's map version: %d", c.ShardMapVersion())
	}
	if _, err := c.Reserve(ctx, "plain", Spec{Capacity: 1000, ErrorRate: 0.01}); err != nil {
		t.Fatal(err)
	}
}
