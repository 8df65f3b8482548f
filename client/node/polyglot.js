'use strict';
// polyglot: the Node.js side of tests/polyglot_test.cc, where the C++, Python, Go and Node.js
// clients add and check the same items in one filter and must agree on every answer.
//
//   node polyglot.js TARGET FILTER add|add-pipelined|check|check-pipelined < ITEMS
//   node polyglot.js WRITER,READER FILTER read-your-writes[-pipelined] < ITEMS
//   node polyglot.js TARGET FILTER cuckoo-add|remove|count < ITEMS
//
// ITEMS: one hex-encoded item per line. Prints 1 or 0 per item. In the -pipelined modes every
// item is its own concurrent call (coalesced by the client). read-your-writes adds each item
// through WRITER, hands the writer's last sequence to a client of READER (another pod), and
// prints whether READER answers it present (tests/replication_test.cc). cuckoo-add adds to a
// CUCKOO filter (created if missing), remove prints 1 or 0 per item removed, count the copies
// held of each item. Exit 1 on an error.

const fs = require('fs');
const { BloomClient } = require('.');

async function main([target, filter, mode]) {
  const items = fs.readFileSync(0, 'utf8').split('\n').filter((line) => line.trim() !== '')
    .map((line) => Buffer.from(line.trim(), 'hex'));
  const pipelined = mode.endsWith('-pipelined');
  if (mode.startsWith('read-your-writes')) {
    const [writerTarget, readerTarget] = target.split(',');
    const writer = new BloomClient(writerTarget, { pipelined });
    const reader = new BloomClient(readerTarget, { pipelined });
    try {
      const createIfMissing = { capacity: 10_000, errorRate: 0.001 };
      for (const item of items) {
        await writer.add(filter, [item], { createIfMissing });
        reader.observeSequence(writer.lastSequence);
        process.stdout.write((await reader.mightContain(filter, [item]))[0] ? '1\n' : '0\n');
      }
    } finally {
      writer.close();
      reader.close();
    }
    return;
  }
  if (['cuckoo-add', 'remove', 'count'].includes(mode)) {
    const cuckoo = new BloomClient(target);
    try {
      let lines;
      if (mode === 'cuckoo-add') {
        const createIfMissing = { capacity: 10_000, errorRate: 0.001, kind: 'cuckoo' };
        lines = (await cuckoo.add(filter, items, { createIfMissing })).map((r) => (r ? 1 : 0));
      } else if (mode === 'remove') {
        lines = (await cuckoo.remove(filter, items)).map((r) => (r ? 1 : 0));
      } else {
        lines = await cuckoo.count(filter, items);
      }
      process.stdout.write(lines.map((line) => `${line}\n`).join(''));
    } finally {
      cuckoo.close();
    }
    return;
  }
  const client = new BloomClient(target, { pipelined });
  const options = mode.startsWith('add')
    ? { createIfMissing: { capacity: 10_000, errorRate: 0.001 } } : {};
  const call = (batch) => (mode.startsWith('add') ? client.add(filter, batch, options)
    : client.mightContain(filter, batch, options));
  try {
    const results = pipelined
      ? (await Promise.all(items.map((item) => call([item])))).flat()
      : await call(items);
    process.stdout.write(results.map((r) => (r ? '1\n' : '0\n')).join(''));
  } finally {
    client.close();
  }
}

if (process.argv.length !== 5) {
  console.error('usage: node polyglot.js TARGET FILTER add|add-pipelined|check|check-pipelined');
  process.exit(2);
}
main(process.argv.slice(2)).catch((error) => {
  console.error(error.message);
  process.exit(1);
});
