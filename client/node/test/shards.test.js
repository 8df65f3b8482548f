'use strict';
// Shard routing (`shardRouting: true`) against a real sharded deployment: a real etcd (the etcd
// and etcdctl programs) and two bloom-server groups of one pod each, the map written by etcdctl.

const assert = require('assert/strict');
const { test } = require('node:test');
const { spawn, spawnSync } = require('child_process');
const fs = require('fs');
const net = require('net');
const os = require('os');
const path = require('path');
const { BloomClient, slotOf, hashedPart } = require('..');
const { startServer, startServerOn } = require('./server');

const SLOTS = 64;
const GROUPS = ['node-shards/a', 'node-shards/b'];
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

function freePort() {
  return new Promise((resolve) => {
    const server = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

async function waitFor(what, done) {
  const deadline = Date.now() + 30_000;
  while (!(await done())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

// A name with `prefix` whose slot group `group` (0: a, 1: b) owns.
function nameIn(group, prefix) {
  for (let n = 0; ; n++) {
    if (Math.floor(slotOf(`${prefix}${n}`, SLOTS) / (SLOTS / 2)) === group) return `${prefix}${n}`;
  }
}

test('the slot function is the server\'s', () => {
  // The values of the server's common/slot_test.cc and the other clients' tests.
  assert.equal(slotOf('123456789', 4096), 2342);
  assert.equal(slotOf('user:1', 4096), 0x7BA5C282 % 4096);
  assert.equal(slotOf('', 4096), 0);
  assert.equal(slotOf('anything', 1), 0);
  assert.equal(slotOf('é', 4096), 3390);
  assert.equal(hashedPart('feed:{user42}:seen').toString(), 'user42');
  assert.equal(hashedPart('x{}y').toString(), 'x{}y');
  assert.equal(hashedPart('a{{b}c').toString(), '{b');
});

test('calls go straight to the owning group\'s primary', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bloom-node-etcd-'));
  const endpoint = `127.0.0.1:${await freePort()}`;
  const peer = `127.0.0.1:${await freePort()}`;
  const etcd = spawn('etcd', [`--data-dir=${dir}/data`, `--listen-client-urls=http://${endpoint}`,
    `--advertise-client-urls=http://${endpoint}`, `--listen-peer-urls=http://${peer}`,
    `--initial-advertise-peer-urls=http://${peer}`, `--initial-cluster=default=http://${peer}`,
    '--log-level=error'], { stdio: 'ignore' });
  t.after(() => {
    etcd.kill('SIGKILL');
    fs.rmSync(dir, { recursive: true, force: true });
  });
  const etcdctl = (...args) => spawnSync('etcdctl', [`--endpoints=${endpoint}`, ...args],
    { env: { ...process.env, ETCDCTL_API: '3' } }).status;
  await waitFor('etcd', () => etcdctl('endpoint', 'health') === 0);
  const record = `format=1 version=1 slots=${SLOTS} groups=${GROUPS.join(',')} `
    + `owners=${GROUPS[0]}:0-${SLOTS / 2 - 1},${GROUPS[1]}:${SLOTS / 2}-${SLOTS - 1}`;
  assert.equal(etcdctl('put', 'node-shards/shardmap', record), 0);
  const pods = [];
  for (const group of GROUPS) {
    const address = `127.0.0.1:${await freePort()}`;
    pods.push(await startServerOn(t, address, `--advertise_address=${address}`,
      `--etcd_endpoints=${endpoint}`, `--cluster=${group}`, '--shard_map=node-shards/shardmap',
      '--leader_ttl=2s'));
  }
  for (const pod of pods) {
    const probe = new BloomClient(pod.target, { timeoutMs: 2000 });
    await waitFor(`${pod.target} to know both primaries`, () => new Promise((resolve) => {
      probe.stub.GetShardMap({}, probe.metadata, { deadline: Date.now() + 2000 }, (error, r) => {
        resolve(!error && r.map.groups.length === 2 && r.map.groups.every((g) => g.primary));
      });
    }));
    probe.close();
  }

  for (const pipelined of [false, true]) {
    const client = new BloomClient(pods[0].target, { shardRouting: true, pipelined,
      timeoutMs: 5000 });
    await client.shardMapReady;
    assert.equal(client.shardMapVersion, 1);
    const inA = nameIn(0, `node-direct-${pipelined}-`);
    const inB = nameIn(1, `node-direct-${pipelined}-`);
    for (const name of [inA, inB]) {
      assert.equal(await client.reserve(name, { capacity: 1000, errorRate: 0.01 }), true);
    }
    // With the seed (group a's pod) stopped, group b's filters are still reached.
    pods[0].child.kill('SIGSTOP');
    try {
      assert.deepEqual(await client.add(inB, ['x', 'y']), [true, true]);
      assert.deepEqual(await client.mightContain(inB, ['x', 'z']), [true, false]);
      assert.equal((await client.stats(inB)).itemsAdded, 2);
    } finally {
      pods[0].child.kill('SIGCONT');
    }
    assert.deepEqual(await client.add(inA, ['x']), [true]);
    client.close();
  }

  // An unsharded server takes every call.
  const plain = await startServer(t);
  const client = new BloomClient(plain.target, { shardRouting: true });
  await client.shardMapReady;
  assert.equal(client.shardMapVersion, 0);
  assert.equal(await client.reserve('plain', { capacity: 1000, errorRate: 0.01 }), true);
  client.close();
});
