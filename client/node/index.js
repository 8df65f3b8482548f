'use strict';
// Node.js client for bloom-server (bloom.v1.BloomFilterService): every call returns a promise.
//
//   const { BloomClient } = require('@bloom-server/client');  // or './client/node' in this repo
//   const client = new BloomClient('127.0.0.1:50051');
//   await client.reserve('users', { capacity: 1_000_000, errorRate: 0.01 });
//   await client.add('users', ['alice', 'bob']);              // -> [true, true]
//   await client.mightContain('users', ['alice', 'carol']);   // -> [true, false]
//   client.close();
//
// An item is its bytes: a string is its UTF-8 bytes, a Buffer or Uint8Array itself, an integer
// its decimal string (as the C++ and Python clients send them). Lists longer than `batchSize`
// go out as several requests, in order (each request is atomic on the server; the list is not).
//
// Errors reject with an Error whose `code` is the gRPC status code (`status.NOT_FOUND`, ...,
// the numbers of @grpc/grpc-js's `status`) and whose `details` is the server's message, which
// names the offending field. Every call has a deadline: options.timeoutMs (default 10 s), or a
// per-call `{ deadline }` (a Date or epoch ms).
//
// Security: `token` is sent as "authorization: Bearer <token>" with every call; `tls: true`
// (or an object { rootCerts, privateKey, certChain } of PEM Buffers, for private CAs and
// mutual TLS) connects with TLS.
//
// Pipelined mode (`pipelined: true`): add(), mightContain(), remove() and count() travel over
// bloom.v1.Pipeline streams (count() once the stream's server has said it takes counts; before, and
// with older servers, it is a unary call), and concurrent calls of one kind on the same filter
// (Node services issue many concurrent awaits) go out as one operation (pipeline.js). A broken
// stream fails its unanswered calls with UNAVAILABLE (retry an add, which is idempotent; a remove
// may have been made).
//
// Sharded deployments: any pod forwards a call for a filter another group owns, one hop. With
// `shardRouting: true` the client sends each call straight to the owning group's primary
// instead (shards.js), and follows the map as slots move; await `client.shardMapReady` to start
// with the map. Sequences are then each group's own; `lastSequence` is the target's.
//
// Replicas: any pod of a replicated deployment serves any call (followers forward writes to the
// primary). Writes answer with a sequence; the client keeps the highest (`lastSequence`) and
// sends it with every read, so a follower answers a read only once it has applied this
// client's writes. observeSequence() passes a sequence on from another client.
//
// Concurrency: a BloomClient may be used by any number of concurrent calls.

const fs = require('fs');
const path = require('path');
const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');
const { Coalescer, NOT_SENT } = require('./pipeline');
const { ShardRoutes, slotOf, hashedPart } = require('./shards');
const { toItems, statusError } = require('./items');

// bloom.proto: the packed package carries its own copy (package.json's prepack); in this
// repository it is read from protos/.
const PACKAGED_PROTO_DIR = path.join(__dirname, 'protos');
const PROTO_DIR = fs.existsSync(path.join(PACKAGED_PROTO_DIR, 'bloom', 'v1', 'bloom.proto'))
  ? PACKAGED_PROTO_DIR
  : path.join(__dirname, '..', '..', 'protos');
const DUMP_CHUNK = 1 << 20;

let servicePackage = null;
function loadService() {
  if (servicePackage === null) {
    const definition = protoLoader.loadSync('bloom/v1/bloom.proto', {
      includeDirs: [PROTO_DIR],
      longs: Number, // uint64 counters as numbers (exact below 2^53)
      enums: String,
      defaults: true,
      oneofs: true,
    });
    servicePackage = grpc.loadPackageDefinition(definition).bloom.v1;
  }
  return servicePackage;
}

function credentialsFor(tls) {
  if (!tls) return grpc.credentials.createInsecure();
  const options = tls === true ? {} : tls;
  return grpc.credentials.createSsl(options.rootCerts || null, options.privateKey || null,
    options.certChain || null);
}

// A google.protobuf.Duration from milliseconds (null: unset).
function duration(ms) {
  if (!ms) return null;
  const seconds = Math.floor(ms / 1000);
  return { seconds, nanos: Math.round((ms - seconds * 1000) * 1e6) };
}

const KINDS = { bloom: 'FILTER_KIND_UNSPECIFIED', cuckoo: 'FILTER_KIND_CUCKOO' };

// windowMs: forget items added longer ago (kept in windowSlices slices, 0: the server's 8);
// idleTtlMs: delete the filter after this long without an add or check; kind: 'bloom' or
// 'cuckoo' (a cuckoo filter can remove() and count() items, and has no window).
function spec({
  capacity, errorRate, expansion = 0, nonScaling = false, windowMs = 0, windowSlices = 0,
  idleTtlMs = 0, kind = 'bloom',
}) {
  if (!(kind in KINDS)) throw new TypeError(`kind must be 'bloom' or 'cuckoo', not '${kind}'`);
  return {
    capacity, errorRate, expansion, nonScaling, window: duration(windowMs), windowSlices,
    idleTtl: duration(idleTtlMs), kind: KINDS[kind],
  };
}

// round_robin: a target naming several pods (see BloomClient) gets a connection to each and
// spreads the calls over those that answer; a pod that goes away is out of the rotation once its
// connection closes. One address behaves as gRPC's default (pick_first). Reads are retried (on
// the next pod) when they fail UNAVAILABLE, as the C++ and Python clients do; writes are not: an
// add whose answer was lost may have been made, and a remove must not be made twice.
const SERVICE_CONFIG = JSON.stringify({
  loadBalancingConfig: [{ round_robin: {} }],
  methodConfig: [{
    name: ['MightContain', 'Count', 'Stats', 'List']
      .map((method) => ({ service: 'bloom.v1.BloomFilterService', method })),
    retryPolicy: {
      maxAttempts: 3,
      initialBackoff: '0.01s',
      maxBackoff: '0.1s',
      backoffMultiplier: 2,
      retryableStatusCodes: ['UNAVAILABLE'],
    },
  }],
});

class BloomClient {
  /**
   * @param {string} target "host:port", or several pods of a replicated deployment:
   *     "dns:///name:port" (every address the name has, e.g. a headless Service's) or
   *     "ipv4:10.0.0.1:50051,10.0.0.2:50051"; calls are then spread over the pods that answer,
   *     and a pod that goes away is skipped at once
   * @param {object} [options] { token, tls, timeoutMs, batchSize, pipelined, streams,
   *     serverName (the name to verify in the server's certificate) }
   */
  constructor(target, options = {}) {
    this.options = { timeoutMs: 10_000, batchSize: 10_000, streams: 1, ...options };
    // A pod restarting, or rebuilding its server in a new role when the primary fails over, is
    // back within a second or so: reconnect every few hundred milliseconds rather than after
    // gRPC's default backoff (1 s, growing to 2 min).
    const channelOptions = {
      'grpc.initial_reconnect_backoff_ms': 200,
      'grpc.min_reconnect_backoff_ms': 200,
      'grpc.max_reconnect_backoff_ms': 5000,
      'grpc.service_config': SERVICE_CONFIG,
    };
    if (options.serverName) channelOptions['grpc.ssl_target_name_override'] = options.serverName;
    const { BloomFilterService } = loadService();
    this.metadata = new grpc.Metadata();
    if (options.token) this.metadata.set('authorization', `Bearer ${options.token}`);
    // Where some filters' calls go: a stub, its pipelined streams, and the highest write
    // sequence seen through it (shared with the coalescer's streams).
    const makeRoute = (address) => {
      const stub = new BloomFilterService(address, credentialsFor(options.tls), channelOptions);
      const sequence = { value: 0 };
      const coalescer = options.pipelined
        ? new Coalescer(stub, () => this.metadata, this.options.batchSize, this.options.streams,
          sequence)
        : null;
      return {
        stub,
        sequence,
        coalescer,
        observe(value) {
          if (value > sequence.value) sequence.value = value;
        },
        close() {
          if (coalescer) coalescer.close();
          stub.close();
        },
      };
    };
    this.seed = makeRoute(target);
    this.stub = this.seed.stub;
    this.sequence = this.seed.sequence;
    this.coalescer = this.seed.coalescer;
    this.shards = null;
    this.shardMapReady = Promise.resolve();
    if (options.shardRouting) {
      this.shards = new ShardRoutes(this.seed, makeRoute, () => this.metadata,
        this.options.timeoutMs);
      // Without the map yet (the pod is not up), calls go through the pod named, which forwards
      // them, and the first forwarded answer fetches it.
      this.shardMapReady = this.shards.refresh().catch(() => {});
    }
  }

  /** The version of the shard map this client routes by (0: none, or not sharded). */
  get shardMapVersion() {
    return this.shards ? this.shards.version : 0;
  }

  _route(name) {
    return this.shards ? this.shards.forName(name) : this.seed;
  }

  /** The highest sequence a write through this client was given (sent with every read). */
  get lastSequence() {
    return this.sequence.value;
  }

  /** Raises lastSequence to one learned elsewhere (another client that wrote). */
  observeSequence(sequence) {
    if (sequence > this.sequence.value) this.sequence.value = sequence;
  }

  close() {
    if (this.shards) this.shards.close();
    this.seed.close();
  }

  _deadline(callOptions) {
    if (callOptions && callOptions.deadline !== undefined) return callOptions.deadline;
    return Date.now() + this.options.timeoutMs;
  }

  _unary(method, request, callOptions, route = this.seed) {
    return new Promise((resolve, reject) => {
      const call = route.stub[method](request, this.metadata,
        { deadline: this._deadline(callOptions) }, (error, response) => {
          if (error && this.shards) this.shards.afterError(error);
          return error ? reject(error) : resolve(response);
        });
      if (this.shards) call.on('metadata', (headers) => this.shards.afterHeaders(headers));
    });
  }

  /** Creates a filter; resolves to true if created, false if it existed with this spec. */
  async reserve(name, filterSpec, callOptions) {
    const route = this._route(name);
    const response = await this._unary('Reserve', { name, spec: spec(filterSpec) }, callOptions,
      route);
    route.observe(response.sequence);
    return response.created;
  }

  /**
   * Creates an empty filter with the spec and hash seed of filter `like`, so that the two can be
   * merged; resolves to true if created, false if it existed already like it.
   */
  async reserveLike(name, like, callOptions) {
    const route = this._route(name);
    const response = await this._unary('Reserve', { name, like }, callOptions, route);
    route.observe(response.sequence);
    return response.created;
  }

  /** ORs the filters `sources` (made alike: reserveLike) into `target`; resolves to its stats. */
  async merge(target, sources, callOptions) {
    const route = this._route(target);
    const response = await this._unary('Merge', { target, sources }, callOptions, route);
    route.observe(response.sequence);
    return response.stats;
  }

  /** Adds items; resolves to added[i]: items[i] was (probably) new. */
  add(name, items, callOptions = {}) {
    const create = callOptions.createIfMissing ? spec(callOptions.createIfMissing) : null;
    const route = this._route(name);
    return this._batched(toItems(items), callOptions, (batch) => {
      if (route.coalescer) {
        return route.coalescer.call({ add: true, name, create, items: batch },
          this._deadline(callOptions));
      }
      return this._unary('Add', { name, rawItems: batch, createIfMissing: create }, callOptions,
        route).then((response) => {
        route.observe(response.sequence);
        return response.added;
      });
    });
  }

  /**
   * Checks items; resolves to present[i]: false means items[i] was never added. With
   * { absentIfMissing: true } a missing filter answers all false instead of NOT_FOUND.
   */
  mightContain(name, items, callOptions = {}) {
    const absent = Boolean(callOptions.absentIfMissing);
    const route = this._route(name);
    return this._batched(toItems(items), callOptions, (batch) => {
      if (route.coalescer) {
        return route.coalescer.call({ add: false, name, absent, items: batch },
          this._deadline(callOptions));
      }
      return this._unary('MightContain', {
        name, rawItems: batch, absentIfMissing: absent, minSequence: route.sequence.value,
      }, callOptions, route).then((response) => response.present);
    });
  }

  /**
   * Cuckoo filters: removes one copy of each item; resolves to removed[i]: the filter held one.
   * Remove only what was added (removing another item can remove a colliding item's copy, which
   * then reads absent). Not idempotent: a retried call removes another copy.
   */
  remove(name, items, callOptions = {}) {
    const route = this._route(name);
    return this._batched(toItems(items), callOptions, (batch) => {
      if (route.coalescer) {
        return route.coalescer.call({ remove: true, name, items: batch },
          this._deadline(callOptions));
      }
      return this._unary('Remove', { name, rawItems: batch }, callOptions, route)
        .then((response) => {
          route.observe(response.sequence);
          return response.removed;
        });
    });
  }

  /** Cuckoo filters: resolves to counts[i], the copies of items[i] the filter holds. */
  count(name, items, callOptions = {}) {
    const route = this._route(name);
    return this._batched(toItems(items), callOptions, async (batch) => {
      if (route.coalescer) {
        const counts = await route.coalescer.call({ count: true, name, items: batch },
          this._deadline(callOptions));
        if (counts !== NOT_SENT) return counts;
        // This stream's server has not said it takes counts yet: unary.
      }
      const response = await this._unary('Count', {
        name, rawItems: batch, minSequence: route.sequence.value,
      }, callOptions, route);
      return response.counts;
    });
  }

  async _batched(items, callOptions, send) {
    if (items.length === 0) {
      throw statusError(grpc.status.INVALID_ARGUMENT, 'items must not be empty');
    }
    const out = [];
    for (let start = 0; start < items.length; start += this.options.batchSize) {
      const batch = items.slice(start, start + this.options.batchSize);
      let results;
      try {
        results = await send(batch);
      } catch (error) {
        if (this.shards) this.shards.afterError(error); // a pipelined operation's refusal
        throw error;
      }
      if (results.length !== batch.length) {
        throw statusError(grpc.status.INTERNAL,
          `the server answered ${results.length} results for ${batch.length} items`);
      }
      out.push(...results);
    }
    return out;
  }

  /** Resolves to the filter's stats (FilterStats, camelCase fields). */
  async stats(name, callOptions) {
    const route = this._route(name);
    return (await this._unary('Stats', { name, minSequence: route.sequence.value }, callOptions,
      route)).stats;
  }

  async delete(name, callOptions) {
    const route = this._route(name);
    const response = await this._unary('Delete', { name }, callOptions, route);
    route.observe(response.sequence);
  }

  /** Resolves to the stats of every filter whose name starts with prefix, reading all pages. */
  async list(prefix = '', callOptions) {
    const filters = [];
    let pageToken = '';
    do {
      const page = await this._unary('List', {
        prefix, pageSize: 1000, pageToken, minSequence: this.lastSequence,
      }, callOptions);
      filters.push(...page.filters);
      pageToken = page.nextPageToken;
    } while (pageToken);
    return filters;
  }

  /** Resolves to the filter's dump (a Buffer). The deadline covers the whole transfer. */
  export(name, callOptions) {
    return new Promise((resolve, reject) => {
      const chunks = [];
      const route = this._route(name);
      const call = route.stub.Export({ name, minSequence: route.sequence.value }, this.metadata,
        { deadline: this._deadline(callOptions) });
      call.on('data', (chunk) => chunks.push(chunk.data));
      call.on('error', reject);
      call.on('end', () => resolve(Buffer.concat(chunks)));
    });
  }

  /**
   * Creates filter `name` from a dump (a Buffer); resolves to its stats. With
   * { mergeIntoExisting: true }, an existing filter `name` (made alike the dump's) gets the dump
   * ORed into it instead of ALREADY_EXISTS.
   */
  import(name, dump, callOptions) {
    return new Promise((resolve, reject) => {
      const route = this._route(name);
      const call = route.stub.Import(this.metadata, { deadline: this._deadline(callOptions) },
        (error, response) => {
          if (error) {
            reject(error);
            return;
          }
          route.observe(response.sequence);
          resolve(response.stats);
        });
      call.write({
        name,
        data: dump.subarray(0, DUMP_CHUNK),
        mergeIntoExisting: Boolean(callOptions && callOptions.mergeIntoExisting),
      });
      for (let start = DUMP_CHUNK; start < dump.length; start += DUMP_CHUNK) {
        call.write({ data: dump.subarray(start, start + DUMP_CHUNK) });
      }
      call.end();
    });
  }
}

module.exports = { BloomClient, status: grpc.status, slotOf, hashedPart };
