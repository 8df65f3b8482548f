'use strict';
// Guards a cache against lookups of ids that do not exist (cache penetration).
//
//   node client/node/example.js [HOST:PORT]   (default 127.0.0.1:50051)

const { BloomClient } = require('@bloom-server/client');

async function main(target = '127.0.0.1:50051') {
  const client = new BloomClient(target, { token: process.env.BLOOM_TOKEN });
  try {
    await client.reserve('example:user-ids', { capacity: 100_000, errorRate: 0.001 });
    const ids = Array.from({ length: 1000 }, (_, i) => 1000 + i); // ids that exist
    await client.add('example:user-ids', ids);
    for (const id of [1500, 424242]) {
      const [seen] = await client.mightContain('example:user-ids', [id]);
      console.log(seen ? `${id}: may exist, look it up` : `${id}: does not exist, skip the database`);
    }
  } finally {
    client.close();
  }
}

main(...process.argv.slice(2)).catch((error) => {
  console.error(error.message);
  process.exit(1);
});
