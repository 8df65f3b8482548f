// Types of the Node.js client for bloom-server (index.js): the public API only. Every call
// returns a promise and rejects with a ServiceError (its `code` is a gRPC status code).

import type { status as grpcStatus, ServiceError } from '@grpc/grpc-js';

/** An item is its bytes: a string its UTF-8 bytes, an integer its decimal string. */
export type Item = string | number | bigint | Buffer | Uint8Array;

export interface FilterSpec {
  /** Items the first sub-filter holds at errorRate. */
  capacity: number;
  /** The target false-positive rate, in (0, 1). */
  errorRate: number;
  /** Each new sub-filter's capacity over the last's (0: the server's default). */
  expansion?: number;
  /** A full filter refuses adds (RESOURCE_EXHAUSTED) instead of growing. */
  nonScaling?: boolean;
  /** Forget items added longer ago than this (0: never). */
  windowMs?: number;
  /** The window's slices (0: the server's default). */
  windowSlices?: number;
  /** Delete the filter after this long without an add or a check (0: never). */
  idleTtlMs?: number;
  /** 'cuckoo': a filter that can remove() and count() items (no window). Default 'bloom'. */
  kind?: 'bloom' | 'cuckoo';
}

export interface ClientOptions {
  /** Sent as "authorization: Bearer <token>" with every call. */
  token?: string;
  /** true, or PEM buffers for a private CA and mutual TLS. */
  tls?: boolean | { rootCerts?: Buffer; privateKey?: Buffer; certChain?: Buffer };
  /** The name to verify in the server's certificate. */
  serverName?: string;
  /** Every call's deadline unless it passes its own (default 10000). */
  timeoutMs?: number;
  /** Items per request; longer lists go out as several requests in order (default 10000). */
  batchSize?: number;
  /** add() and mightContain() over coalescing Pipeline streams. */
  pipelined?: boolean;
  /** Pipeline streams in pipelined mode (default 1). */
  streams?: number;
  /**
   * In a sharded deployment, send each call straight to the primary of the group that owns its
   * filter (the map fetched from the target's pod, and again when it changes).
   */
  shardRouting?: boolean;
}

export interface CallOptions {
  /** A Date or epoch milliseconds; default now + timeoutMs. */
  deadline?: Date | number;
}

export interface AddOptions extends CallOptions {
  /** Create the filter with this spec when it does not exist. */
  createIfMissing?: FilterSpec;
}

export interface CheckOptions extends CallOptions {
  /** A missing filter answers all false instead of NOT_FOUND. */
  absentIfMissing?: boolean;
}

export interface Duration {
  seconds: number;
  nanos: number;
}

export interface Timestamp {
  seconds: number;
  nanos: number;
}

export interface SubFilterStats {
  capacity: number;
  errorRate: number;
  bits: number;
  hashCount: number;
  itemsAdded: number;
  fillRatio: number;
  sliceStart: Timestamp | null;
}

/** bloom.v1.FilterStats with camelCase fields (uint64 counters as numbers). */
export interface FilterStats {
  name: string;
  spec: {
    capacity: number;
    errorRate: number;
    expansion: number;
    nonScaling: boolean;
    window: Duration | null;
    windowSlices: number;
    idleTtl: Duration | null;
  };
  capacity: number;
  sizeBytes: number;
  subFilters: number;
  itemsAdded: number;
  estimatedCardinality: number;
  fillRatio: number;
  estimatedErrorRate: number;
  subFilterStats: SubFilterStats[];
  createdAt: Timestamp | null;
  checks: number;
  checkHits: number;
  expiresAt: Timestamp | null;
  windowStart: Timestamp | null;
}

export class BloomClient {
  /**
   * target: "host:port", or several pods: "dns:///name:port" or "ipv4:10.0.0.1:50051,...";
   * calls are then spread over the pods that answer.
   */
  constructor(target: string, options?: ClientOptions);
  /** The highest sequence a write through this client was given (sent with every read). */
  readonly lastSequence: number;
  /** The version of the shard map this client routes by (0: none, or not sharded). */
  readonly shardMapVersion: number;
  /** Settles once the first fetch of the shard map is over (at once without shardRouting). */
  readonly shardMapReady: Promise<void>;
  /** Raises lastSequence to one learned elsewhere (another client that wrote). */
  observeSequence(sequence: number): void;
  close(): void;
  /** Resolves to true if created, false if the filter existed with this spec. */
  reserve(name: string, spec: FilterSpec, options?: CallOptions): Promise<boolean>;
  /** An empty filter with the spec and hash seed of `like`, to merge with it. */
  reserveLike(name: string, like: string, options?: CallOptions): Promise<boolean>;
  /** ORs `sources` (filters made alike) into `target`; resolves to the target's stats. */
  merge(target: string, sources: string[], options?: CallOptions): Promise<FilterStats>;
  /** Resolves to added[i]: items[i] was (probably) new. */
  add(name: string, items: Item[], options?: AddOptions): Promise<boolean[]>;
  /** Resolves to present[i]: false means items[i] was never added. */
  mightContain(name: string, items: Item[], options?: CheckOptions): Promise<boolean[]>;
  /**
   * Cuckoo filters: removes one copy of each item; removed[i]: the filter held one. Remove only
   * what was added; not idempotent (a retried call removes another copy).
   */
  remove(name: string, items: Item[], options?: CallOptions): Promise<boolean[]>;
  /** Cuckoo filters: the copies of each item held. */
  count(name: string, items: Item[], options?: CallOptions): Promise<number[]>;
  stats(name: string, options?: CallOptions): Promise<FilterStats>;
  delete(name: string, options?: CallOptions): Promise<void>;
  /** The stats of every filter whose name starts with prefix (all pages). */
  list(prefix?: string, options?: CallOptions): Promise<FilterStats[]>;
  /** The filter's dump; the deadline covers the whole transfer. */
  export(name: string, options?: CallOptions): Promise<Buffer>;
  /** Creates filter `name` from a dump (or ORs it into an existing one); resolves to its stats. */
  import(name: string, dump: Buffer | Uint8Array,
    options?: CallOptions & { mergeIntoExisting?: boolean }): Promise<FilterStats>;
}

export const status: typeof grpcStatus;
export type { ServiceError };

/** The slot of filter `name` among `slotCount`: CRC-32 of its name, or of its {hash tag}. */
export function slotOf(name: string | Buffer, slotCount: number): number;
/** The bytes of `name` its slot hashes: its hash tag, or all of it. */
export function hashedPart(name: string | Buffer): Buffer;
