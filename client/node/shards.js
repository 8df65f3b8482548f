'use strict';
// Shard routing (`shardRouting: true`): a client's copy of its sharded deployment's map
// (bloom.v1 GetShardMap), to send each call for a filter straight to the primary of the group
// that owns the filter's slot instead of through a pod that would forward it. The C++, Python,
// Java and Go clients do the same.
//
// A filter's slot is the CRC-32 (IEEE, zlib's) of its name's UTF-8 bytes modulo the map's slot
// count; a name with a hash tag, 'feed:{user42}:seen', hashes only the tag. The copy is fetched
// again when an answer says it is stale: a forwarded answer's bloom-shard-map-version header
// names a later version (one fetch per version), or an error says a filter belongs to another
// group (at most one fetch each 100 ms). Calls meanwhile go where the copy says, and the pods
// forward what it gets wrong. An unsharded server (version 0) or one that predates sharding
// (UNIMPLEMENTED) routes everything to the seed.

const grpc = require('@grpc/grpc-js');

const REFRESH_INTERVAL_MS = 100;

const CRC_TABLE = (() => {
  const table = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    table[n] = c >>> 0;
  }
  return table;
})();

function crc32(bytes) {
  let crc = 0xffffffff;
  for (const byte of bytes) crc = CRC_TABLE[(crc ^ byte) & 0xff] ^ (crc >>> 8);
  return (crc ^ 0xffffffff) >>> 0;
}

/** The bytes of `name` (a string or Buffer) its slot hashes: its hash tag, or all of it. */
function hashedPart(name) {
  const raw = Buffer.isBuffer(name) ? name : Buffer.from(String(name), 'utf8');
  const start = raw.indexOf('{');
  if (start < 0) return raw;
  const end = raw.indexOf('}', start + 1);
  if (end < 0 || end === start + 1) return raw;
  return raw.subarray(start + 1, end);
}

/** The slot of filter `name` among `slotCount` (0 counts as 1). */
function slotOf(name, slotCount) {
  return crc32(hashedPart(name)) % Math.max(1, slotCount);
}

class ShardRoutes {
  // `seed`: the client's own route ({ stub, coalescer, sequence }); `makeRoute(address)` opens
  // one to a group's primary; `metadata()` is the calls' token.
  constructor(seed, makeRoute, metadata, timeoutMs) {
    this.seed = seed;
    this.makeRoute = makeRoute;
    this.metadata = metadata;
    this.timeoutMs = timeoutMs;
    this.version = 0;
    this.owners = []; // per slot: a route, or null (the seed)
    this.byAddress = new Map();
    this.retired = [];
    this.lastRefresh = 0;
    this.fetching = null; // the fetch in progress
    this.closed = false;
  }

  /** Fetches the map from the seed (unless this copy already holds `atLeast`). */
  refresh(atLeast = 0) {
    if (atLeast && this.version >= atLeast) return Promise.resolve();
    if (this.fetching) return this.fetching;
    this.lastRefresh = Date.now();
    this.fetching = new Promise((resolve, reject) => {
      this.seed.stub.GetShardMap({}, this.metadata(), { deadline: Date.now() + this.timeoutMs },
        (error, response) => {
          this.fetching = null;
          if (error) {
            if (error.code === grpc.status.UNIMPLEMENTED) resolve();
            else reject(error);
            return;
          }
          this._install(response.map);
          resolve();
        });
    });
    return this.fetching;
  }

  _install(map) {
    const version = Number(map.version);
    if (this.closed || version <= this.version) return; // never back
    const byAddress = new Map();
    const byGroup = new Map();
    for (const group of map.groups) {
      if (!group.primary) continue; // none now: its filters go through the seed
      let route = byAddress.get(group.primary) || this.byAddress.get(group.primary);
      if (!route) route = this.makeRoute(group.primary);
      byAddress.set(group.primary, route);
      byGroup.set(group.name, route);
    }
    const owners = new Array(map.slotCount).fill(null);
    for (const range of map.ranges) {
      for (let slot = range.first; slot <= range.last && slot < owners.length; slot++) {
        owners[slot] = byGroup.get(range.group) || null;
      }
    }
    for (const [address, route] of this.byAddress) {
      if (!byAddress.has(address)) this.retired.push(route);
    }
    this.version = version;
    this.owners = owners;
    this.byAddress = byAddress;
  }

  /** The route of filter `name`'s calls. */
  forName(name) {
    if (this.owners.length === 0) return this.seed;
    return this.owners[slotOf(name, this.owners.length)] || this.seed;
  }

  /** A call's answer headers: a forwarded answer names the map version its pod holds. */
  afterHeaders(metadata) {
    const named = metadata.get('bloom-shard-map-version');
    if (named.length === 0) return;
    const version = Number(named[0]);
    if (version > this.version) this.refresh(version).catch(() => {});
    else this._refreshIfDue();
  }

  /** A failed call: a pod's refusal of a filter another group owns fetches the map. */
  afterError(error) {
    if (error && error.code === grpc.status.UNAVAILABLE
        && String(error.details || error.message).includes('belongs to group')) {
      this._refreshIfDue();
    }
  }

  _refreshIfDue() {
    if (Date.now() - this.lastRefresh >= REFRESH_INTERVAL_MS) this.refresh().catch(() => {});
  }

  close() {
    this.closed = true;
    for (const route of [...this.byAddress.values(), ...this.retired]) route.close();
    this.byAddress = new Map();
    this.retired = [];
    this.owners = [];
  }
}

module.exports = { ShardRoutes, slotOf, hashedPart };
