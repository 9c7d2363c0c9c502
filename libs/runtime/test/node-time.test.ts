import { Writable } from 'node:stream';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import {
  CLOCK_OFFSET_WARN_MS,
  clockOffNow,
  followNodeTime,
  NODE_TIME_SAMPLE_MS,
  type TimeReference,
} from '../src/index.ts';

/** A reference whose samples and offset the test sets, and whose periodic sampling the test drives. */
function fakeReference(first: boolean) {
  const state = { offsetMs: undefined as number | undefined, next: first, intervalMs: 0 };
  let onSample: (sampled: boolean) => void = () => undefined;
  const reference: TimeReference = {
    get offsetMs() {
      return state.offsetMs;
    },
    sample: async () => {
      if (state.next && state.offsetMs === undefined) state.offsetMs = 0;
      return state.next;
    },
    start: (intervalMs, listener) => {
      state.intervalMs = intervalMs;
      onSample = listener;
    },
    stop: () => undefined,
  };
  return { reference, state, sample: (sampled: boolean) => onSample(sampled) };
}

function logged() {
  const lines: { level: number; msg: string; clockOffsetMs?: number }[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines.push(JSON.parse(chunk.toString()) as (typeof lines)[number]);
      done();
    },
  });
  return { logger: pino({ level: 'info' }, stream), lines };
}

describe('clockOffNow: when the host clock is beyond the bound', () => {
  it('beyond it either way; no sample keeps the previous verdict', () => {
    expect(clockOffNow(false, CLOCK_OFFSET_WARN_MS + 1, CLOCK_OFFSET_WARN_MS)).toBe(true);
    expect(clockOffNow(false, -CLOCK_OFFSET_WARN_MS - 1, CLOCK_OFFSET_WARN_MS)).toBe(true);
    expect(clockOffNow(true, CLOCK_OFFSET_WARN_MS, CLOCK_OFFSET_WARN_MS)).toBe(false);
    expect(clockOffNow(true, undefined, CLOCK_OFFSET_WARN_MS)).toBe(true);
    expect(clockOffNow(false, undefined, CLOCK_OFFSET_WARN_MS)).toBe(false);
  });
});

describe('followNodeTime: what a process says of its clock', () => {
  it('once anchored, a warn line when the host goes beyond the bound and an info line when it is back, once each', async () => {
    const { reference, state, sample } = fakeReference(true);
    const { logger, lines } = logged();
    await followNodeTime(reference, logger);
    expect(state.intervalMs).toBe(NODE_TIME_SAMPLE_MS);
    state.offsetMs = 29_000;
    sample(true);
    sample(true);
    sample(false); // no quorum: nothing new to say
    state.offsetMs = 12;
    sample(true);
    expect(lines.map((line) => [line.level, line.msg.split(':')[0], line.clockOffsetMs])).toEqual([
      [30, 'wall time from the lock nodes', 0],
      [40, "this host's clock is off the lock nodes' time", 29_000],
      [30, "this host's clock agrees with the lock nodes' time again", 12],
    ]);
  });

  it('no quorum at start: said at warn after trying for 3 s, and said again once a sample anchors the clock', async () => {
    const { reference, state, sample } = fakeReference(false);
    const { logger, lines } = logged();
    await followNodeTime(reference, logger);
    expect(lines.map((line) => [line.level, line.msg.split(':')[0]])).toEqual([
      [40, "the lock nodes' time could not be read (no quorum answered)"],
    ]);
    state.next = true;
    await reference.sample();
    sample(true);
    expect(lines.at(-1)?.msg.split(':')[0]).toBe('wall time from the lock nodes');
  }, 10_000);
});
