'use strict';
// Items as bytes, and errors shaped like @grpc/grpc-js's ServiceError.

/** An Error with a gRPC status `code` and `details`, as grpc-js rejects calls with. */
function statusError(code, details) {
  const { status } = require('@grpc/grpc-js');
  const name = Object.keys(status).find((key) => status[key] === code) || 'UNKNOWN';
  const error = new Error(`${code} ${name}: ${details}`);
  error.code = code;
  error.details = details;
  return error;
}

/** One item as its bytes: string (UTF-8), Buffer / Uint8Array, or integer (decimal). */
function toItem(item) {
  if (Buffer.isBuffer(item)) return item;
  if (item instanceof Uint8Array) return Buffer.from(item.buffer, item.byteOffset, item.length);
  if (typeof item === 'string') return Buffer.from(item, 'utf8');
  if (typeof item === 'bigint') return Buffer.from(item.toString(), 'ascii');
  if (typeof item === 'number' && Number.isSafeInteger(item)) {
    return Buffer.from(String(item), 'ascii');
  }
  throw new TypeError(
    `items must be strings, Buffers, Uint8Arrays or safe integers, not ${typeof item} ${item}`);
}

function toItems(items) {
  if (!Array.isArray(items)) throw new TypeError('items must be an array');
  return items.map(toItem);
}

module.exports = { statusError, toItem, toItems };
