'use strict';
// polyglot: the Node.js side of tests/polyglot_test.cc, where the C++, Python, Go and Node.js
// clients add and check the same items in one filter and must agree on every answer.
//
//   node polyglot.js TARGET FILTER add|add-pipelined|check|check-pipelined < ITEMS
//
// ITEMS: one hex-encoded item per line. Prints 1 or 0 per item. In the -pipelined modes every
// item is its own concurrent call (coalesced by the client). Exit 1 on an error.

const fs = require('fs');
const { BloomClient } = require('.');

async function main([target, filter, mode]) {
  const items = fs.readFileSync(0, 'utf8').split('\n').filter((line) => line.trim() !== '')
    .map((line) => Buffer.from(line.trim(), 'hex'));
  const pipelined = mode.endsWith('-pipelined');
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
