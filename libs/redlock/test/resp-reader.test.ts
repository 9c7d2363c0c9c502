import { describe, expect, it } from 'vitest';
import { RespReader } from '../src/resp-reader.ts';

/** Every reply `bytes` holds, fed in chunks cut at `cuts`. */
function read(bytes: string, cuts: number[] = []): unknown[] {
  const replies: unknown[] = [];
  const reader = new RespReader((reply) => replies.push(reply));
  const data = Buffer.from(bytes);
  let from = 0;
  for (const cut of [...cuts, data.length]) {
    reader.feed(data.subarray(from, cut));
    from = cut;
  }
  return replies;
}

// What acquire.lua answers for three resources (a code, a pair with a fence, a pair with a claim's
// holder), a nil, a bulk string with a multi-byte character, and an error reply.
const REPLIES =
  '*3\r\n:1\r\n*2\r\n:-2\r\n$2\r\n17\r\n*2\r\n:-1\r\n$5\r\nv-\u00e9!\r\n$-1\r\n+OK\r\n-NOSCRIPT No matching script\r\n:42\r\n';

describe('RespReader', () => {
  it('reads integers, bulk and simple strings, nil, nested arrays and errors', () => {
    const [codes, nil, ok, error, answer] = read(REPLIES);
    expect(codes).toEqual([1, [-2, '17'], [-1, 'v-\u00e9!']]);
    expect(nil).toBeNull();
    expect(ok).toBe('OK');
    expect(error).toBeInstanceOf(Error);
    expect((error as Error).message).toBe('NOSCRIPT No matching script');
    expect(answer).toBe(42);
  });

  it('reads the same replies however the bytes are cut into chunks', () => {
    const whole = read(REPLIES);
    const length = Buffer.byteLength(REPLIES);
    for (let cut = 1; cut < length; cut++) expect(read(REPLIES, [cut])).toEqual(whole);
    for (let cut = 1; cut + 3 < length; cut += 3) expect(read(REPLIES, [cut, cut + 1, cut + 3])).toEqual(whole);
  });

  it('throws on bytes that are not RESP, and on a line that never ends within 64 KiB', () => {
    expect(() => read('HTTP/1.1 400\r\n')).toThrow(/not a RESP reply/);
    expect(() => read(':12a\r\n')).toThrow(/not a RESP integer/);
    expect(() => read(`+${'x'.repeat(70_000)}`)).toThrow(/longer than 64 KiB/);
  });

  it('reset drops a partial reply: the next connection starts clean', () => {
    const replies: unknown[] = [];
    const reader = new RespReader((reply) => replies.push(reply));
    reader.feed(Buffer.from('*2\r\n:1\r\n'));
    reader.reset();
    reader.feed(Buffer.from(':7\r\n'));
    expect(replies).toEqual([7]);
  });
});
