'use strict';
// The Node.js client's pipelined mode: concurrent small calls coalesced over Pipeline streams.
//
// Calls of one kind (add, check, remove, count) on the same filter that wait together go out as one
// operation with all their items (removes in the order they were made), with no timer: calls made
// while a stream is idle are sent together at the end of the current tick (a microtask, so a burst
// of concurrent awaits is one operation and nothing waits on a clock); calls made while operations
// are in flight gather, and the answer to the last of them sends them. Each caller's promise
// settles with its own answer or at its deadline.
//
// Operations that leave together, on any number of filters (one filter per user), are packed
// into one message (PipelineRequest.more, up to PACKED_BYTES) once the server's
// bloom-pipeline-more header says it reads them: a message costs the server more than a small
// operation, and the adds of one message share one RocksDB write. Counts go on a stream only
// once its bloom-pipeline-count header says the server takes them (older servers end the stream
// on one): until then a count settles with NOT_SENT, and the client makes the unary call.
//
// A merged operation failing with INVALID_ARGUMENT or RESOURCE_EXHAUSTED is retried one call at
// a time, so each call gets the answer it would get alone. A broken stream fails its unanswered
// calls with UNAVAILABLE (an add is idempotent: retry it; a remove is not, and may have been
// made), or with the server's UNAUTHENTICATED / PERMISSION_DENIED when it refused the token; the
// next call opens a new stream.

const { status } = require('@grpc/grpc-js');
const { statusError } = require('./items');

const RETRY_ALONE = new Set([status.INVALID_ARGUMENT, status.RESOURCE_EXHAUSTED]);
const PACKED_BYTES = 1 << 20; // most bytes of operations packed into one message (as C++, Python)
const REFUSED = new Set([status.UNAUTHENTICATED, status.PERMISSION_DENIED]);
// What a count not sent settles with (see above).
const NOT_SENT = Symbol('count not sent');

function operationKey(call) {
  const create = call.create ? JSON.stringify(call.create) : '';
  const kind = call.add ? 'a' : call.remove ? 'r' : call.count ? 'n' : 'c';
  return `${kind}${call.absent ? 1 : 0}${create}\u0000${call.name}`;
}

class Lane {
  constructor(stub, metadata, maxItems, sequence) {
    this.sequence = sequence; // { value }: raised by adds' answers, sent with checks
    this.stub = stub;
    this.metadata = metadata;
    this.maxItems = maxItems;
    this.waiting = [];
    this.inFlight = new Map(); // operation id -> { items, calls }
    this.sending = false; // operations are in flight or about to be sent
    this.nextId = 1;
    this.stream = null;
    this.packs = false; // the open stream's server reads a request's `more`
    this.counts = false; // the open stream's server takes counts
    this.operationsSent = 0;
    this.messagesSent = 0;
  }

  submit(call) {
    this.waiting.push(call);
    if (this.sending) return;
    this.sending = true;
    queueMicrotask(() => this._sendWaiting());
  }

  close() {
    if (this.stream) this.stream.cancel();
  }

  _open() {
    const stream = this.stub.Pipeline(this.metadata());
    // Until the server's headers say it reads `more`, nothing is packed (an older server would
    // ignore packed operations and never answer them).
    // Servers send their headers when the stream opens (those that predate
    // bloom-pipeline-count: with the first answer).
    stream.on('metadata', (metadata) => {
      if (stream !== this.stream) return;
      if (metadata.get('bloom-pipeline-more')[0] === '1') this.packs = true;
      if (metadata.get('bloom-pipeline-count')[0] === '1') this.counts = true;
    });
    stream.on('data', (response) => {
      // A packed message's answers come in one response: its own, then its `more`'s.
      const more = response.more || [];
      this._answer(stream, response);
      for (const part of more) this._answer(stream, part);
    });
    stream.on('error', (error) => this._ended(stream, error));
    stream.on('end', () => this._ended(stream, null));
    this.stream = stream;
    this.packs = false;
    this.counts = false;
  }

  _sendWaiting() {
    if (this.stream === null) this._open();
    const open = new Map();
    for (const call of this.waiting) {
      if (call.count && !this.counts) {
        call.resolve(NOT_SENT);
        continue;
      }
      const key = call.alone ? null : operationKey(call);
      let request = key === null ? undefined : open.get(key);
      if (request && this.inFlight.get(request.id).items + call.items.length > this.maxItems) {
        request = undefined;
      }
      if (!request) {
        request = { id: this.nextId++ };
        if (call.add) {
          request.add = { name: call.name, rawItems: [], createIfMissing: call.create };
        } else if (call.remove) {
          request.remove = { name: call.name, rawItems: [] };
        } else if (call.count) {
          request.count = { name: call.name, rawItems: [], minSequence: this.sequence.value };
        } else {
          request.mightContain = {
            name: call.name, rawItems: [], absentIfMissing: call.absent,
            minSequence: this.sequence.value,
          };
        }
        this.inFlight.set(request.id, { items: 0, calls: [], request });
        if (key !== null) open.set(key, request);
      }
      (request.add || request.remove || request.count || request.mightContain).rawItems
        .push(...call.items);
      const operation = this.inFlight.get(request.id);
      operation.items += call.items.length;
      operation.calls.push(call);
    }
    this.waiting = [];
    const batch = [];
    for (const operation of this.inFlight.values()) {
      if (operation.request) {
        batch.push(operation.request);
        operation.request = null;
      }
    }
    for (const message of this._pack(batch)) this.stream.write(message);
    this.operationsSent += batch.length;
    if (this.inFlight.size === 0) this.sending = false; // every call was a count not sent
  }

  // The operations as few messages as the server reads: the first of each carries the others
  // in `more`, up to PACKED_BYTES (counted from the items and names, near enough).
  _pack(batch) {
    if (!this.packs || batch.length < 2) {
      this.messagesSent += batch.length;
      return batch;
    }
    const messages = [];
    let size = 0;
    for (const request of batch) {
      const operation = request.add || request.remove || request.count || request.mightContain;
      let requestSize = 32 + operation.name.length;
      for (const item of operation.rawItems) requestSize += item.length + 3;
      if (messages.length > 0 && size + requestSize <= PACKED_BYTES) {
        const head = messages[messages.length - 1];
        (head.more = head.more || []).push(request);
        size += requestSize;
      } else {
        messages.push(request);
        size = requestSize;
      }
    }
    this.messagesSent += messages.length;
    return messages;
  }

  _answer(stream, response) {
    const operation = this.inFlight.get(Number(response.id));
    if (stream !== this.stream || !operation) return;
    this.inFlight.delete(Number(response.id));
    let { calls } = operation;
    const error = response.result === 'error' ? response.error : null;
    if (error && calls.length > 1 && RETRY_ALONE.has(error.code)) {
      for (const call of calls) call.alone = true;
      this.waiting.push(...calls);
      calls = [];
    }
    if (this.inFlight.size === 0) {
      if (this.waiting.length > 0) this._sendWaiting();
      else this.sending = false;
    }
    if (error) {
      for (const call of calls) call.reject(statusError(error.code, error.message));
      return;
    }
    const written = response.result === 'add' ? response.add
      : response.result === 'remove' ? response.remove : null;
    if (written && written.sequence > this.sequence.value) {
      this.sequence.value = written.sequence; // before the callers hear of their writes
    }
    const results = response.result === 'add' ? response.add.added
      : response.result === 'remove' ? response.remove.removed
        : response.result === 'count' ? response.count.counts
          : response.mightContain.present;
    let start = 0;
    for (const call of calls) {
      call.resolve(results.slice(start, start + call.items.length));
      start += call.items.length;
    }
  }

  _ended(stream, error) {
    if (stream !== this.stream) return;
    this.stream = null;
    let failure;
    if (error && REFUSED.has(error.code)) {
      failure = statusError(error.code, error.details);
    } else {
      const why = error ? `${error.details} (code ${error.code})` : 'by the server';
      failure = statusError(status.UNAVAILABLE,
        `the Pipeline stream ended: ${why}; an add may be retried, a remove may have been made`);
    }
    const calls = [...this.waiting];
    for (const operation of this.inFlight.values()) calls.push(...operation.calls);
    this.waiting = [];
    this.inFlight = new Map();
    this.sending = false;
    for (const call of calls) call.reject(failure);
  }
}

class Coalescer {
  constructor(stub, metadata, maxItems, streams = 1, sequence = { value: 0 }) {
    this.lanes = [];
    for (let i = 0; i < Math.max(1, streams); i++) {
      this.lanes.push(new Lane(stub, metadata, maxItems, sequence));
    }
  }

  /**
   * call: { add, remove, count, name, create, absent, items }; resolves to one bool per item
   * (a count: one number per item, or NOT_SENT).
   */
  call(call, deadline) {
    return new Promise((resolve, reject) => {
      const ms = (deadline instanceof Date ? deadline.getTime() : deadline) - Date.now();
      const timer = setTimeout(() => {
        settled.reject(statusError(status.DEADLINE_EXCEEDED, `no answer within the deadline`));
      }, Math.max(0, ms));
      let done = false;
      const settled = {
        resolve: (value) => { if (!done) { done = true; clearTimeout(timer); resolve(value); } },
        reject: (error) => { if (!done) { done = true; clearTimeout(timer); reject(error); } },
      };
      call.resolve = settled.resolve;
      call.reject = settled.reject;
      let hash = 0;
      for (let i = 0; i < call.name.length; i++) hash = (hash * 31 + call.name.charCodeAt(i)) | 0;
      this.lanes[Math.abs(hash) % this.lanes.length].submit(call);
    });
  }

  close() {
    for (const lane of this.lanes) lane.close();
  }
}

module.exports = { Coalescer, NOT_SENT };
