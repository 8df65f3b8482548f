'use strict';
// Tests of the Node.js client against the real bloom-server (node --test; run by ctest).

const assert = require('assert/strict');
const { test } = require('node:test');
const { BloomClient, status } = require('..');
const { startServer, tokenFile, selfSigned } = require('./server');

const spec = { capacity: 10_000, errorRate: 0.001 };
const numbered = (prefix, n) => Array.from({ length: n }, (_, i) => `${prefix}-${i}`);

async function rejectsWith(promise, code, what) {
  await assert.rejects(promise, (error) => {
    assert.equal(error.code, code, `${what}: ${error.message}`);
    return true;
  });
}

test('reserve, add and check in batches, stats, list, delete', async (t) => {
  const server = await startServer(t);
  const client = new BloomClient(server.target, { batchSize: 7 });
  t.after(() => client.close());
  assert.equal(await client.reserve('node:users', spec), true);
  assert.equal(await client.reserve('node:users', spec), false);
  const items = [...numbered('user', 50), Buffer.from([0, 0xff, 10]), 'ünïcødé', 1001];
  const added = await client.add('node:users', items);
  assert.deepEqual(added, items.map(() => true));
  const strangers = numbered('stranger', 50);
  const present = await client.mightContain('node:users', [...items, ...strangers]);
  assert.deepEqual(present.slice(0, items.length), items.map(() => true));
  assert.ok(present.slice(items.length).filter(Boolean).length <= 3, 'too many false positives');
  // An item is its bytes: the integer 1001, the string "1001" and its Buffer are one item.
  assert.deepEqual(await client.mightContain('node:users', ['1001', Buffer.from('1001')]),
    [true, true]);
  const stats = await client.stats('node:users');
  assert.equal(stats.name, 'node:users');
  assert.equal(stats.itemsAdded, items.length);
  for (let i = 0; i < 3; i++) await client.reserve(`node:other-${i}`, spec);
  const listed = await client.list('node:');
  assert.deepEqual(listed.map((f) => f.name),
    ['node:other-0', 'node:other-1', 'node:other-2', 'node:users']);
  await client.delete('node:users');
  await rejectsWith(client.stats('node:users'), status.NOT_FOUND, 'stats after delete');
});

test('windowed and idle filters: the spec round-trips, bad durations name their field', async (t) => {
  const server = await startServer(t);
  const client = new BloomClient(server.target);
  t.after(() => client.close());
  const week = 7 * 24 * 3600 * 1000;
  const windowed = { ...spec, windowMs: week, idleTtlMs: 30 * 24 * 3600 * 1000 };
  assert.equal(await client.reserve('node:seen', windowed), true);
  assert.equal(await client.reserve('node:seen', { ...windowed, windowSlices: 8 }), false);
  assert.deepEqual(await client.add('node:seen', ['a']), [true]);
  const stats = await client.stats('node:seen');
  assert.equal(Number(stats.spec.window.seconds), week / 1000);
  assert.equal(stats.spec.windowSlices, 8);
  assert.ok(stats.expiresAt !== null && stats.windowStart !== null);
  await assert.rejects(client.reserve('node:bad', { ...spec, windowMs: 500 }), (error) => {
    assert.equal(error.code, status.INVALID_ARGUMENT);
    assert.match(error.message, /spec\.window/);
    return true;
  });
});

test('errors keep the server\'s codes and messages', async (t) => {
  const server = await startServer(t);
  const client = new BloomClient(server.target);
  t.after(() => client.close());
  await rejectsWith(client.mightContain('node:missing', ['a']), status.NOT_FOUND, 'missing');
  await assert.rejects(client.reserve('bad name!', spec), (error) => {
    assert.equal(error.code, status.INVALID_ARGUMENT);
    assert.match(error.details, /name/);
    return true;
  });
  await client.reserve('node:f', spec);
  await rejectsWith(client.reserve('node:f', { capacity: 99, errorRate: 0.01 }),
    status.ALREADY_EXISTS, 'another spec');
  await rejectsWith(client.add('node:f', []), status.INVALID_ARGUMENT, 'no items');
  assert.throws(() => client.add('node:f', [{}]), TypeError);
  await rejectsWith(client.add('node:f', ['a'], { deadline: Date.now() - 1 }),
    status.DEADLINE_EXCEEDED, 'a past deadline');
  // absentIfMissing answers all absent and creates nothing; createIfMissing creates.
  assert.deepEqual(await client.mightContain('node:user-7', ['a', 'b'], { absentIfMissing: true }),
    [false, false]);
  await rejectsWith(client.stats('node:user-7'), status.NOT_FOUND, 'created by a check');
  await client.add('node:user-7', ['a'], { createIfMissing: spec });
  assert.deepEqual(await client.mightContain('node:user-7', ['a'], { absentIfMissing: true }),
    [true]);
});

test('export then import answers alike; a truncated dump creates nothing', async (t) => {
  const server = await startServer(t);
  const client = new BloomClient(server.target);
  t.after(() => client.close());
  const items = numbered('x', 5000);
  await client.add('node:src', items, { createIfMissing: spec });
  const dump = await client.export('node:src');
  const stats = await client.import('node:copy', dump);
  assert.equal(stats.itemsAdded, 5000);
  const probe = [...items.slice(0, 100), ...numbered('y', 2000)];
  assert.deepEqual(await client.mightContain('node:copy', probe),
    await client.mightContain('node:src', probe));
  await assert.rejects(client.import('node:bad', dump.subarray(0, dump.length >> 1)),
    (error) => [status.INVALID_ARGUMENT, status.DATA_LOSS].includes(error.code));
  await rejectsWith(client.stats('node:bad'), status.NOT_FOUND, 'a failed import');
});

test('filters made alike merge; one not made alike is refused', async (t) => {
  const server = await startServer(t);
  const client = new BloomClient(server.target);
  t.after(() => client.close());
  await client.reserve('node:all', spec);
  assert.equal(await client.reserveLike('node:shard-1', 'node:all'), true);
  assert.equal(await client.reserveLike('node:shard-2', 'node:all'), true);
  await client.add('node:shard-1', numbered('one', 300));
  await client.add('node:shard-2', numbered('two', 300));
  const stats = await client.merge('node:all', ['node:shard-1', 'node:shard-2']);
  assert.equal(stats.itemsAdded, 600);
  const present = await client.mightContain('node:all', [...numbered('one', 300), ...numbered('two', 300)]);
  assert.ok(present.every(Boolean), 'every source item is in the union');
  // A dump ORed into the existing filter of its name (as from another server).
  await client.reserveLike('node:shard-3', 'node:all');
  await client.add('node:shard-3', ['three']);
  const dump = await client.export('node:shard-3');
  const imported = await client.import('node:all', dump, { mergeIntoExisting: true });
  assert.equal(imported.itemsAdded, 601);
  assert.deepEqual(await client.mightContain('node:all', ['three']), [true]);
  await client.reserve('node:stranger', spec);
  await rejectsWith(client.merge('node:all', ['node:stranger']), status.FAILED_PRECONDITION,
    'a filter not made alike');
});

test('cuckoo filters remove and count', async (t) => {
  const server = await startServer(t);
  const client = new BloomClient(server.target);
  t.after(() => client.close());
  const cuckoo = { capacity: 1000, errorRate: 0.01, kind: 'cuckoo' };
  assert.equal(await client.reserve('node:blocked', cuckoo), true);
  await client.add('node:blocked', ['a', 'b', 'b']);
  assert.deepEqual(await client.count('node:blocked', ['a', 'b', 'z']), [1, 2, 0]);
  assert.deepEqual(await client.remove('node:blocked', ['a', 'z']), [true, false]);
  assert.deepEqual(await client.mightContain('node:blocked', ['a', 'b']), [false, true]);
  const stats = await client.stats('node:blocked');
  assert.equal(stats.spec.kind, 'FILTER_KIND_CUCKOO');
  assert.equal(stats.itemsAdded, 2);
  await client.add('node:feed', ['x'], { createIfMissing: cuckoo });
  assert.deepEqual(await client.count('node:feed', ['x']), [1]);
  await client.reserve('node:plain', spec);
  await rejectsWith(client.remove('node:plain', ['a']), status.FAILED_PRECONDITION,
    'Remove on a Bloom filter');
  await assert.rejects(client.reserve('node:bad', { capacity: 10, errorRate: 0.1, kind: 'quotient' }),
    TypeError);
});

test('pipelined mode coalesces concurrent single-key calls', async (t) => {
  const server = await startServer(t);
  const client = new BloomClient(server.target, { pipelined: true });
  t.after(() => client.close());
  await client.reserve('node:feed', { capacity: 100_000, errorRate: 0.01 });
  const workers = Array.from({ length: 64 }, async (_, w) => {
    for (let i = 0; i < 50; i++) {
      const item = `w${w}-${i}`;
      assert.deepEqual((await client.add('node:feed', [item])).length, 1);
      assert.deepEqual(await client.mightContain('node:feed', [item]), [true],
        `an acknowledged add of ${item} reads absent`);
    }
  });
  await Promise.all(workers);
  const sent = client.coalescer.lanes[0].operationsSent;
  t.diagnostic(`6400 calls went out as ${sent} operations`);
  assert.ok(sent < 6400 / 4, `6400 calls went out as ${sent} operations`);
  assert.equal((await client.stats('node:feed')).itemsAdded, 3200);
});

test('pipelined removes coalesce and remove each copy once', async (t) => {
  const server = await startServer(t);
  const client = new BloomClient(server.target, { pipelined: true });
  t.after(() => client.close());
  // error rate 1e-6: removing an item no longer held finds no other item's fingerprint.
  await client.reserve('node:unfollow', { capacity: 100_000, errorRate: 1e-6, kind: 'cuckoo' });
  const own = [];
  for (let w = 0; w < 32; w++) for (let i = 0; i < 20; i++) own.push(`w${w}-${i}`);
  const shared = Array.from({ length: 64 }, (_, k) => `shared-${k}`);
  await client.add('node:unfollow', [...own, ...shared]);
  const removedShared = new Array(shared.length).fill(0);
  const lane = client.coalescer.lanes[0];
  const before = lane.operationsSent;
  const workers = Array.from({ length: 32 }, async (_, w) => {
    for (let i = 0; i < 20; i++) {
      assert.deepEqual(await client.remove('node:unfollow', [`w${w}-${i}`]), [true]);
      // Workers w and w + 1 race for each shared item k with k % 32 == w.
      for (const owner of [w, (w + 31) % 32]) {
        const k = owner + i * 32;
        if (k < shared.length && (await client.remove('node:unfollow', [shared[k]]))[0]) {
          removedShared[k]++;
        }
      }
    }
  });
  await Promise.all(workers);
  const sent = lane.operationsSent - before;
  assert.deepEqual(removedShared, new Array(shared.length).fill(1));
  const present = await client.mightContain('node:unfollow', own);
  assert.ok(present.every((p) => !p), 'a removed item reads present');
  const calls = own.length + 2 * shared.length;
  assert.ok(sent > 0 && sent < calls / 2, `${calls} removes went out as ${sent} operations`);
});

test('pipelined counts travel on the stream once it says so, each with its own counts', async (t) => {
  const server = await startServer(t);
  const client = new BloomClient(server.target, { pipelined: true });
  t.after(() => client.close());
  await client.reserve('node:counted', { capacity: 100_000, errorRate: 1e-6, kind: 'cuckoo' });
  const lane = client.coalescer.lanes[0];
  // The stream is open (the reserve was unary; this add opens it), and its headers arrive
  // before any answer: every count below goes on it.
  await client.add('node:counted', ['opened']);
  assert.ok(lane.counts, "the server's bloom-pipeline-count header was not seen");
  const before = lane.operationsSent;
  const workers = Array.from({ length: 16 }, async (_, w) => {
    for (let i = 0; i < 20; i++) {
      const item = `w${w}-${i}`;
      for (let copy = 0; copy < i % 3; copy++) await client.add('node:counted', [item]);
      assert.deepEqual(await client.count('node:counted', [item, `absent-${w}-${i}`]), [i % 3, 0]);
    }
  });
  await Promise.all(workers);
  const countCalls = 16 * 20;
  const sent = lane.operationsSent - before;
  assert.ok(sent > 0 && sent < countCalls + 16 * 20, `${sent} operations`);
  await rejectsWith(client.count('node:missing', ['x']), status.NOT_FOUND, 'a missing filter');
  // A client whose first call is a count has no stream yet: that count goes unary, and the
  // stream it opened takes the next ones.
  const fresh = new BloomClient(server.target, { pipelined: true });
  t.after(() => fresh.close());
  assert.deepEqual(await fresh.count('node:counted', ['w0-1']), [1]);
  const freshLane = fresh.coalescer.lanes[0];
  await new Promise((resolve) => setTimeout(resolve, 200));
  assert.ok(freshLane.counts, 'the headers of the stream opened by the first count did not come');
  const freshSent = freshLane.operationsSent;
  assert.deepEqual(await fresh.count('node:counted', ['w0-2', 'w0-3']), [2, 0]);
  assert.equal(freshLane.operationsSent, freshSent + 1);
});

test('pipelined calls on many filters pack into few messages', async (t) => {
  const server = await startServer(t);
  const client = new BloomClient(server.target, { pipelined: true });
  const plain = new BloomClient(server.target);
  t.after(() => { client.close(); plain.close(); });
  const perUser = { capacity: 1000, errorRate: 0.01 };
  const workers = Array.from({ length: 16 }, async (_, w) => {
    for (let i = 0; i < 40; i++) {
      const name = `node-pp:user-${w}-${i % 7}`;
      const item = `seen-${i}`;
      assert.equal((await client.add(name, [item], { createIfMissing: perUser })).length, 1);
      assert.deepEqual(await client.mightContain(name, [item], { absentIfMissing: true }), [true],
        `an acknowledged add of ${item} to ${name} reads absent`);
    }
  });
  await Promise.all(workers);
  const lane = client.coalescer.lanes[0];
  t.diagnostic(`${lane.operationsSent} operations went out in ${lane.messagesSent} messages`);
  assert.ok(lane.packs, "the server's bloom-pipeline-more header was not seen");
  assert.ok(lane.messagesSent < lane.operationsSent,
    `${lane.operationsSent} operations went out in ${lane.messagesSent} messages`);
  for (let w = 0; w < 16; w++) {
    for (let i = 0; i < 40; i++) {
      assert.deepEqual(await plain.mightContain(`node-pp:user-${w}-${i % 7}`, [`seen-${i}`]),
        [true]);
    }
  }
});

test('pipelined errors stay with their call', async (t) => {
  const server = await startServer(t, '--max_item_bytes=100');
  const client = new BloomClient(server.target, { pipelined: true });
  t.after(() => client.close());
  await client.reserve('node:f', spec);
  const calls = Array.from({ length: 40 }, (_, i) =>
    client.add('node:f', [i % 10 === 3 ? 'x'.repeat(101) : `item-${i}`]).then(
      () => null, (error) => error));
  const results = await Promise.all(calls);
  results.forEach((error, i) => {
    if (i % 10 === 3) assert.equal(error && error.code, status.INVALID_ARGUMENT, `call ${i}`);
    else assert.equal(error, null, `call ${i}: ${error}`);
  });
  await rejectsWith(client.mightContain('node:nope', ['a']), status.NOT_FOUND, 'pipelined');
  assert.deepEqual(await client.mightContain('node:nope', ['a'], { absentIfMissing: true }),
    [false]);
});

test('a broken pipelined stream fails its calls with UNAVAILABLE', async (t) => {
  const server = await startServer(t);
  const client = new BloomClient(server.target, { pipelined: true, timeoutMs: 20_000 });
  t.after(() => client.close());
  await client.add('node:f', ['a'], { createIfMissing: spec });
  server.kill();
  const started = Date.now();
  await rejectsWith(client.add('node:f', ['b']), status.UNAVAILABLE, 'after the server died');
  assert.ok(Date.now() - started < 15_000, 'waited for a dead server');
  // The next call opens a new stream, and what was acknowledged before the crash is there.
  await server.restart();
  const deadline = Date.now() + 15_000;
  for (;;) {
    try {
      assert.deepEqual(await client.mightContain('node:f', ['a']), [true],
        'an add acknowledged before kill -9 reads absent');
      break;
    } catch (error) {
      if (error.code !== status.UNAVAILABLE || Date.now() > deadline) throw error;
      await new Promise((resolve) => setTimeout(resolve, 50)); // grpc-js reconnects with backoff
    }
  }
});

test('a target naming several servers spreads the calls and skips one killed', async (t) => {
  // "ipv4:a,b", as a headless Service's DNS name resolves; the servers are independent, each
  // with its own filter.
  const servers = [await startServer(t), await startServer(t)];
  for (const server of servers) {
    const direct = new BloomClient(server.target);
    await direct.add('node:f', ['x'], { createIfMissing: spec });
    direct.close();
  }
  const client = new BloomClient(`ipv4:${servers.map((s) => s.target).join(',')}`,
    { timeoutMs: 5000 });
  t.after(() => client.close());
  for (let i = 0; i < 20; i += 1) {
    assert.deepEqual(await client.mightContain('node:f', ['x', 'y']), [true, false]);
  }
  for (const server of servers) {
    const direct = new BloomClient(server.target);
    const stats = await direct.stats('node:f');
    direct.close();
    assert.ok(Number(stats.checks) > 0, `${server.target} served no check`);
  }
  servers[0].kill();
  // At once: a read that meets the killed pod's connection is retried on the other pod.
  for (let i = 0; i < 20; i += 1) {
    assert.deepEqual(await client.mightContain('node:f', ['x']), [true], `call ${i}`);
  }
});

test('TLS and tokens with roles', async (t) => {
  const probe = await startServer(t); // only for a temp dir that is cleaned up
  const { certFile, keyFile, cert } = selfSigned(probe.dir);
  const server = await startServer(t, `--tls_cert_file=${certFile}`, `--tls_key_file=${keyFile}`,
    `--auth_token_file=${tokenFile(probe.dir, 's3cret-token')}`);
  const tls = { rootCerts: cert };
  for (const pipelined of [false, true]) {
    const name = `node:pipelined-${pipelined}`;
    const clients = [];
    const open = (options) => {
      const c = new BloomClient(server.target, { tls, pipelined, ...options });
      clients.push(c);
      return c;
    };
    t.after(() => clients.forEach((c) => c.close()));
    await open({ token: 's3cret-token' }).add(name, ['a'], { createIfMissing: spec });
    const reader = open({ token: 's3cret-token-r' });
    assert.deepEqual(await reader.mightContain(name, ['a']), [true]);
    await rejectsWith(reader.add(name, ['b']), status.PERMISSION_DENIED, 'read token adds');
    await rejectsWith(open({}).mightContain(name, ['a']), status.UNAUTHENTICATED, 'no token');
  }
  const plaintext = new BloomClient(server.target, { token: 's3cret-token', timeoutMs: 3000 });
  t.after(() => plaintext.close());
  await rejectsWith(plaintext.stats('node:pipelined-false'), status.UNAVAILABLE, 'plaintext');
});
