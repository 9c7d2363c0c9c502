/** Marks a reply whose bytes have not all arrived. */
const INCOMPLETE = Symbol('incomplete');

const CR = 13;
const MAX_LINE = 64 * 1024;

/**
 * Reads RESP2 replies from a connection's bytes as they arrive, in order: integers as numbers,
 * simple and bulk strings as strings (UTF-8), nil as null, arrays as arrays, and an error reply
 * as an `Error` carrying the node's message (`NOSCRIPT ...`), handed over, not thrown. A reply
 * split across chunks waits for the rest; the lock scripts' replies are a few bytes, so the rare
 * split is re-read whole rather than resumed.
 */
export class RespReader {
  readonly #onReply: (reply: unknown) => void;
  #rest: Buffer | undefined;
  #data: Buffer = Buffer.alloc(0);
  #at = 0;

  constructor(onReply: (reply: unknown) => void) {
    this.#onReply = onReply;
  }

  /** Reads every reply `chunk` completes. Throws on bytes that are not RESP (the connection must go). */
  feed(chunk: Buffer): void {
    const data = this.#rest ? Buffer.concat([this.#rest, chunk]) : chunk;
    this.#rest = undefined;
    let start = 0;
    while (start < data.length) {
      this.#data = data;
      this.#at = start;
      const reply = this.#read();
      if (reply === INCOMPLETE) {
        this.#rest = data.subarray(start);
        return;
      }
      start = this.#at;
      this.#onReply(reply);
    }
  }

  /** Drops a partial reply (the connection it came from is gone). */
  reset(): void {
    this.#rest = undefined;
  }

  #read(): unknown {
    const data = this.#data;
    const type = data[this.#at];
    const end = data.indexOf(CR, this.#at + 1);
    if (end < 0 || end + 1 >= data.length) {
      if (data.length - this.#at > MAX_LINE) throw new Error('a reply line longer than 64 KiB');
      return INCOMPLETE;
    }
    const lineStart = this.#at + 1;
    this.#at = end + 2;
    switch (type) {
      case 0x3a: // ':' integer
        return integer(data, lineStart, end);
      case 0x2b: // '+' simple string
        return data.toString('utf8', lineStart, end);
      case 0x2d: // '-' error
        return new Error(data.toString('utf8', lineStart, end));
      case 0x24: {
        // '$' bulk string
        const length = integer(data, lineStart, end);
        if (length < 0) return null;
        if (this.#at + length + 2 > data.length) return INCOMPLETE;
        const text = data.toString('utf8', this.#at, this.#at + length);
        this.#at += length + 2;
        return text;
      }
      case 0x2a: {
        // '*' array
        const count = integer(data, lineStart, end);
        if (count < 0) return null;
        const items = new Array<unknown>(count);
        for (let i = 0; i < count; i++) {
          const item = this.#read();
          if (item === INCOMPLETE) return INCOMPLETE;
          items[i] = item;
        }
        return items;
      }
      default:
        throw new Error(`not a RESP reply (type byte ${String(type)})`);
    }
  }
}

/** The decimal integer in `data[from, to)`, optional minus sign. */
function integer(data: Buffer, from: number, to: number): number {
  const negative = data[from] === 0x2d;
  let value = 0;
  for (let i = negative ? from + 1 : from; i < to; i++) {
    const digit = (data[i] as number) - 0x30;
    if (digit < 0 || digit > 9) throw new Error('not a RESP integer');
    value = value * 10 + digit;
  }
  return negative ? -value : value;
}
