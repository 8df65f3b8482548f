package bloom

// Shard routing (Options.ShardRouting): a client's copy of its sharded deployment's map
// (bloom.v1 GetShardMap), to send each call for a filter straight to the primary of the group
// that owns the filter's slot instead of through a pod that would forward it. The C++, Python
// and Java clients do the same (client/shard_routes.h, bloom_shards.py, ShardRoutes.java).
//
// A filter's slot is the CRC-32 (IEEE, zlib's) of its name's bytes modulo the map's slot count;
// a name with a hash tag, "feed:{user42}:seen", hashes only the tag. The copy is fetched again
// when an answer says it is stale: a forwarded answer's bloom-shard-map-version header names a
// later version (one fetch per version), or an error says a filter belongs to another group (at
// most one fetch each 100 ms). Fetches run on a goroutine of their own; calls meanwhile go where
// the copy says, and the pods forward what it gets wrong. An unsharded server (version 0) or one
// that predates sharding (Unimplemented) routes everything to the seed.

import (
	"bytes"
	"context"
	"hash/crc32"
	"strconv"
	"strings"
	"sync"
	"time"

	bloomv1 "github.com/bloom-server/bloom-server/client/go/bloomv1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// route is where a client sends some filters' calls: a connection, its pipelined streams, and
// the sequence of the writes made through it (read-your-writes is kept per group).
type route struct {
	conn      *grpc.ClientConn
	stub      bloomv1.BloomFilterServiceClient
	coalescer *coalescer // nil unless pipelined
	sequence  *sequence
}

func (r *route) close() {
	if r.coalescer != nil {
		r.coalescer.close()
	}
	r.conn.Close()
}

// HashedPart is the part of a filter name its slot hashes: its hash tag, or all of it.
func HashedPart(name string) []byte {
	raw := []byte(name)
	start := bytes.IndexByte(raw, '{')
	if start < 0 {
		return raw
	}
	end := bytes.IndexByte(raw[start+1:], '}')
	if end <= 0 {
		return raw
	}
	return raw[start+1 : start+1+end]
}

// SlotOf is the slot of filter name among slotCount (0 counts as 1).
func SlotOf(name string, slotCount uint32) uint32 {
	if slotCount == 0 {
		slotCount = 1
	}
	return crc32.ChecksumIEEE(HashedPart(name)) % slotCount
}

const refreshInterval = 100 * time.Millisecond

type shardRoutes struct {
	seed    *route
	dial    func(target string) (*route, error)
	timeout time.Duration
	token   func(context.Context) context.Context

	refreshMu   sync.Mutex // one fetch at a time
	timeMu      sync.Mutex
	lastRefresh time.Time // guarded by timeMu

	mu        sync.Mutex
	version   uint64            // guarded by mu
	owners    []*route          // per slot; nil: the seed; guarded by mu
	byAddress map[string]*route // guarded by mu
	retired   []*route          // former primaries' routes, closed with the client; guarded by mu
	closed    bool              // guarded by mu
}

// refresh fetches the map from the seed (only if this copy is older than atLeast).
func (s *shardRoutes) refresh(atLeast uint64) error {
	s.refreshMu.Lock()
	defer s.refreshMu.Unlock()
	if atLeast != 0 && s.currentVersion() >= atLeast {
		return nil
	}
	s.timeMu.Lock()
	s.lastRefresh = time.Now()
	s.timeMu.Unlock()
	ctx, cancel := context.WithTimeout(s.token(context.Background()), s.timeout)
	defer cancel()
	resp, err := s.seed.stub.GetShardMap(ctx, &bloomv1.GetShardMapRequest{})
	if status.Code(err) == codes.Unimplemented {
		return nil // a server that predates sharding: everything through the seed
	}
	if err != nil {
		return err
	}
	shardMap := resp.GetMap()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || shardMap.GetVersion() <= s.version {
		return nil // never back
	}
	byAddress := map[string]*route{}
	byGroup := map[string]*route{}
	for _, group := range shardMap.GetGroups() {
		if group.GetPrimary() == "" {
			continue // none now: its filters go through the seed, which forwards them
		}
		r := byAddress[group.GetPrimary()]
		if r == nil {
			r = s.byAddress[group.GetPrimary()]
		}
		if r == nil {
			if r, err = s.dial(group.GetPrimary()); err != nil {
				return err
			}
		}
		byAddress[group.GetPrimary()] = r
		byGroup[group.GetName()] = r
	}
	owners := make([]*route, shardMap.GetSlotCount())
	for _, owned := range shardMap.GetRanges() {
		for slot := owned.GetFirst(); slot <= owned.GetLast() && int(slot) < len(owners); slot++ {
			owners[slot] = byGroup[owned.GetGroup()]
		}
	}
	for address, r := range s.byAddress {
		if byAddress[address] == nil {
			s.retired = append(s.retired, r)
		}
	}
	s.version, s.owners, s.byAddress = shardMap.GetVersion(), owners, byAddress
	return nil
}

func (s *shardRoutes) currentVersion() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.version
}

// forName is the route of filter name's calls.
func (s *shardRoutes) forName(name string) *route {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.owners) == 0 {
		return s.seed
	}
	if owner := s.owners[SlotOf(name, uint32(len(s.owners)))]; owner != nil {
		return owner
	}
	return s.seed
}

// afterHeader: an answer named map version named (a forwarded one).
func (s *shardRoutes) afterHeader(named uint64) {
	if named > s.currentVersion() {
		go s.refresh(named) //nolint:errcheck // a failed fetch keeps the copy
	} else {
		s.refreshIfDue()
	}
}

// afterError: a pod's refusal of a filter another group owns fetches the map.
func (s *shardRoutes) afterError(err error) {
	if status.Code(err) == codes.Unavailable && strings.Contains(status.Convert(err).Message(),
		"belongs to group") {
		s.refreshIfDue()
	}
}

func (s *shardRoutes) refreshIfDue() {
	s.timeMu.Lock()
	due := time.Since(s.lastRefresh) >= refreshInterval
	s.timeMu.Unlock()
	if due {
		go s.refresh(0) //nolint:errcheck // a failed fetch keeps the copy
	}
}

// interceptor sees every unary answer's header and error.
func (s *shardRoutes) interceptor(ctx context.Context, method string, req, reply interface{},
	cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	var header metadata.MD
	err := invoker(ctx, method, req, reply, cc, append(opts, grpc.Header(&header))...)
	if values := header.Get("bloom-shard-map-version"); len(values) > 0 {
		if named, parseErr := strconv.ParseUint(values[0], 10, 64); parseErr == nil {
			s.afterHeader(named)
			return err
		}
	}
	if err != nil {
		s.afterError(err)
	}
	return err
}

func (s *shardRoutes) close() {
	s.mu.Lock()
	routes := append([]*route(nil), s.retired...)
	for _, r := range s.byAddress {
		routes = append(routes, r)
	}
	s.closed, s.byAddress, s.retired, s.owners = true, nil, nil, nil
	s.mu.Unlock()
	for _, r := range routes {
		r.close()
	}
}
