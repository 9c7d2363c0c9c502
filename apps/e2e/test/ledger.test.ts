import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { sleep } from '@tickwarden/testkit';
import { afterAll, describe, expect, it } from 'vitest';
import {
  checkLedger,
  LEDGER_JOB,
  LEDGER_MODULE,
  LedgerEndpoint,
  parseLedger,
  readLedger,
  runLengthMs,
  type CheckOptions,
} from '../src/index.ts';

const T1 = '2030-01-01T00:00:01.000Z';
const T2 = '2030-01-01T00:00:02.000Z';
const MS1 = Date.parse(T1);

/** `schedule tick fence attempt event pid wallMs` lines; `at` is ms after T1. */
const line = (
  schedule: string,
  tick: string,
  fence: number,
  attempt: number,
  event: string,
  pid: number,
  at: number,
): string => `${schedule} ${tick} ${fence} ${attempt} ${event} ${pid} ${MS1 + at}`;

function check(lines: string[], options?: CheckOptions): ReturnType<typeof checkLedger> {
  return checkLedger(parseLedger(lines.join('\n') + '\n'), options);
}

describe('the ledger check (a fencing-aware store)', () => {
  it('sequential runs with growing fences are clean; runs keep their first and last wall-clock times', () => {
    const result = check([
      line('t/a', T1, 10, 1, 'start', 1, 5),
      line('t/a', T1, 10, 1, 'beat', 1, 55),
      line('t/a', T1, 10, 1, 'end', 1, 60),
      line('t/a', T2, 11, 1, 'start', 2, 1010),
      line('t/a', T2, 11, 1, 'end', 2, 1020),
    ]);
    expect(result.overlaps).toEqual([]);
    expect(result.fenceRegressions).toEqual([]);
    expect(result.duplicateCompletions).toEqual([]);
    expect([...result.ticksRun]).toEqual([`t/a ${T1}`, `t/a ${T2}`]);
    expect(result.runs[0]).toMatchObject({ firstMs: MS1 + 5, lastMs: MS1 + 60, ended: true });
    expect(result.firstStartMs.get(`t/a ${T2}`)).toBe(MS1 + 1010);
  });

  it('a run that writes after a greater fence started is an overlap', () => {
    const result = check([
      line('t/a', T1, 10, 1, 'start', 1, 0),
      line('t/a', T2, 11, 1, 'start', 2, 1000),
      line('t/a', T1, 10, 1, 'beat', 1, 1001),
      line('t/a', T1, 10, 1, 'beat', 1, 1050),
    ]);
    expect(result.overlaps).toEqual([{ schedule: 't/a', resource: 't/a', staleFence: 10, newerFence: 11, line: 3 }]);
  });

  it('a killed run that never writes again is no overlap, and other schedules do not interfere', () => {
    const result = check([
      line('t/a', T1, 10, 1, 'start', 1, 0),
      line('t/b', T1, 50, 1, 'start', 3, 1),
      line('t/a', T1, 12, 2, 'start', 2, 3000),
      line('t/b', T1, 50, 1, 'end', 3, 3001),
      line('t/a', T1, 12, 2, 'end', 2, 3100),
    ]);
    expect(result.overlaps).toEqual([]);
    expect(result.duplicateCompletions).toEqual([]);
    expect(result.duplicateStarts).toEqual([]);
  });

  it('allow: runs of different ticks hold different leases and may overlap; two attempts of one tick may not', () => {
    const perTick: CheckOptions = { resourceOf: (schedule, tick) => `${schedule} ${tick}` };
    // Tick 1's run still beats after tick 2's (greater fence) started: allowed, each tick has its own lease.
    const ticks = check(
      [
        line('t/x', T1, 10, 1, 'start', 1, 0),
        line('t/x', T2, 11, 1, 'start', 2, 1000),
        line('t/x', T1, 10, 1, 'beat', 1, 1050),
        line('t/x', T1, 10, 1, 'end', 1, 1100),
      ],
      perTick,
    );
    expect(ticks.overlaps).toEqual([]);
    // As one lease (skip), the same lines are an overlap.
    expect(
      check([
        line('t/x', T1, 10, 1, 'start', 1, 0),
        line('t/x', T2, 11, 1, 'start', 2, 1000),
        line('t/x', T1, 10, 1, 'beat', 1, 1050),
      ]).overlaps,
    ).toHaveLength(1);
    // Attempt 2 of tick 1 started while attempt 1 still wrote: an overlap on the tick's lease.
    const attempts = check(
      [
        line('t/x', T1, 10, 1, 'start', 1, 0),
        line('t/x', T1, 12, 2, 'start', 2, 3000),
        line('t/x', T1, 10, 1, 'beat', 1, 3050),
      ],
      perTick,
    );
    expect(attempts.overlaps).toEqual([
      { schedule: 't/x', resource: `t/x ${T1}`, staleFence: 10, newerFence: 12, line: 3 },
    ]);
    // Per lease, tick 2 may start below tick 1's fence; per schedule it may not: a store that keeps the
    // highest token per schedule would reject tick 2's writes (tokens must follow the ticks).
    expect(
      check([line('t/x', T1, 20, 1, 'start', 1, 0), line('t/x', T2, 11, 1, 'start', 2, 1000)], perTick)
        .fenceRegressions,
    ).toEqual([{ schedule: 't/x', resource: 't/x by tick', previousFence: 20, fence: 11, line: 2 }]);
    // Whatever order the runs started in: an earlier tick's retry above the later tick's fence counts too.
    expect(
      check(
        [
          line('t/x', T1, 10, 1, 'start', 1, 0),
          line('t/x', T2, 20, 1, 'start', 2, 1000),
          line('t/x', T1, 20, 2, 'start', 3, 3000),
        ],
        perTick,
      ).fenceRegressions,
    ).toEqual([{ schedule: 't/x', resource: 't/x by tick', previousFence: 20, fence: 20, line: 2 }]);
  });

  it('a tick completed again by a later attempt (its completion lost with the worker) is a re-run, not a duplicate', () => {
    const result = check([
      line('t/a', T1, 10, 1, 'start', 1, 0),
      line('t/a', T1, 10, 1, 'end', 1, 300),
      line('t/a', T1, 12, 2, 'start', 2, 3000),
      line('t/a', T1, 12, 2, 'end', 2, 3300),
    ]);
    expect(result.duplicateCompletions).toEqual([]);
    expect(result.duplicateStarts).toEqual([]);
    expect(result.rerunsAfterCompletion).toEqual([`t/a ${T1}`]);
  });

  it('a fence that does not grow is a regression; a tick completed twice by the same attempt is a duplicate', () => {
    const result = check([
      line('t/a', T1, 10, 1, 'start', 1, 0),
      line('t/a', T1, 10, 1, 'end', 1, 10),
      line('t/a', T1, 9, 1, 'start', 2, 20),
      line('t/a', T1, 9, 1, 'end', 2, 30),
    ]);
    expect(result.fenceRegressions).toEqual([
      { schedule: 't/a', resource: 't/a', previousFence: 10, fence: 9, line: 3 },
    ]);
    expect(result.duplicateCompletions).toEqual([`t/a ${T1}`]);
  });

  it('a tick started twice by the same attempt is a duplicate even when the first run was killed before its end', () => {
    const result = check([
      line('t/a', T1, 10, 1, 'start', 1, 0),
      line('t/a', T1, 14, 1, 'start', 2, 80_000),
      line('t/a', T1, 14, 1, 'end', 2, 80_100),
    ]);
    expect(result.duplicateStarts).toEqual([`t/a ${T1}`]);
    expect(result.duplicateCompletions).toEqual([]);
  });

  it('runs that do not know their attempt (http: 0) get it from the worker logs by fence', () => {
    const lines = [
      line('t/h', T1, 10, 0, 'start', 1, 0),
      line('t/h', T1, 10, 0, 'end', 1, 100),
      line('t/h', T1, 12, 0, 'start', 1, 3000),
      line('t/h', T1, 12, 0, 'end', 1, 3100),
    ];
    const attempts = new Map([
      [10, 1],
      [12, 2],
    ]);
    const resolved = check(lines, { attemptOf: (_schedule, _tick, fence) => attempts.get(fence) });
    expect(resolved.runs.map((run) => run.attempt)).toEqual([1, 2]);
    expect(resolved.rerunsAfterCompletion).toEqual([`t/h ${T1}`]);
    expect(resolved.duplicateCompletions).toEqual([]);
    // Two jobs for one tick both logged as attempt 1: a duplicate.
    expect(check(lines, { attemptOf: () => 1 }).duplicateCompletions).toEqual([`t/h ${T1}`]);
  });

  it('torn or foreign lines are reported, not skipped', () => {
    const result = check([
      line('t/a', T1, 10, 1, 'start', 1, 0),
      `t/a ${T1} 10 1 be`,
      'garbage',
      `t/a ${T1} 10 1 beat 1`,
    ]);
    expect(result.malformed.map((m) => m.line)).toEqual([2, 3, 4]);
  });
});

describe('the ledger handlers write the same lines', () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'tickwarden-ledger-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const tick = '2030-01-01T00:08:09.000Z';

  it('the http endpoint: start, beats while it holds the request, end and 200; nothing more once the client goes away', async () => {
    const ledgerFile = path.join(dir, 'http.txt');
    const endpoint = await LedgerEndpoint.start(ledgerFile);
    try {
      const headers = {
        'X-Tickwarden-Schedule': 't/h',
        'X-Tickwarden-Tick': tick,
        'X-Tickwarden-Fence': '42',
        'content-type': 'application/json',
      };
      const response = await fetch(endpoint.url, {
        method: 'POST',
        headers,
        body: JSON.stringify({ minMs: 200, maxMs: 300 }),
      });
      expect(response.status).toBe(200);
      const done = readLedger(ledgerFile);
      expect(done.malformed).toEqual([]);
      expect(done.lines.map((entry) => entry.event)).toEqual([
        'start',
        ...Array<string>(done.lines.length - 2).fill('beat'),
        'end',
      ]);
      expect(done.lines[0]).toMatchObject({ schedule: 't/h', tick, fence: 42, attempt: 0 });
      const lengthMs = (done.lines.at(-1)?.wallMs ?? 0) - (done.lines[0]?.wallMs ?? 0);
      expect(lengthMs).toBeGreaterThanOrEqual(runLengthMs('t/h', tick, 200, 300));

      const aborted = new AbortController();
      const call = fetch(endpoint.url, {
        method: 'POST',
        headers: { ...headers, 'X-Tickwarden-Fence': '43' },
        body: JSON.stringify({ minMs: 2000, maxMs: 2000 }),
        signal: aborted.signal,
      }).catch(() => 'aborted');
      await sleep(300);
      aborted.abort();
      expect(await call).toBe('aborted');
      await sleep(200);
      const linesAtAbort = readLedger(ledgerFile).lines.filter((entry) => entry.fence === 43);
      await sleep(300);
      const after = readLedger(ledgerFile).lines.filter((entry) => entry.fence === 43);
      expect(after).toEqual(linesAtAbort);
      expect(after.map((entry) => entry.event)).not.toContain('end');
      expect(endpoint.stats).toEqual({ requests: 2, completed: 1, clientGone: 1, rejected: 0 });
      expect((await fetch(endpoint.url, { method: 'POST', body: '{}' })).status).toBe(400);
    } finally {
      await endpoint.close();
    }
  });

  it('the module: start, beats, end; stops without an end on its abort signal', async () => {
    const ledgerFile = path.join(dir, 'module.txt');
    const fixture = (await import(pathToFileURL(LEDGER_MODULE).href)) as {
      default: (context: unknown) => Promise<void>;
    };
    const context = (fence: number, signal: AbortSignal, maxMs: number) => ({
      schedule: 't/m',
      tick,
      tickMs: Date.parse(tick),
      fence,
      jobId: 'j',
      attempt: 1,
      payload: { ledger: ledgerFile, minMs: 100, maxMs },
      signal,
    });
    await fixture.default(context(7, new AbortController().signal, 200));
    const aborted = new AbortController();
    const run = fixture.default(context(8, aborted.signal, 5000));
    await sleep(200);
    aborted.abort();
    await run;
    const lines = readLedger(ledgerFile).lines;
    expect(
      lines
        .filter((entry) => entry.fence === 7)
        .map((entry) => entry.event)
        .at(-1),
    ).toBe('end');
    expect(lines.filter((entry) => entry.fence === 8).map((entry) => entry.event)).not.toContain('end');
    expect(lines.filter((entry) => entry.fence === 8).length).toBeGreaterThan(1);
    expect(lines.every((entry) => entry.pid === process.pid && entry.attempt === 1)).toBe(true);
  });

  it('the command: the same lines, with a run length drawn from schedule and tick', () => {
    const ledgerFile = path.join(dir, 'command.txt');
    const env = {
      ...process.env,
      TICKWARDEN_LEDGER: ledgerFile,
      TICKWARDEN_SCHEDULE: 't/c',
      TICKWARDEN_TICK: tick,
      TICKWARDEN_FENCE: '9',
      TICKWARDEN_ATTEMPT: '2',
      TICKWARDEN_LEDGER_MIN_MS: '100',
      TICKWARDEN_LEDGER_MAX_MS: '400',
    };
    execFileSync('bash', [LEDGER_JOB], { env });
    const { lines, malformed } = readLedger(ledgerFile);
    expect(malformed).toEqual([]);
    expect(lines[0]).toMatchObject({ schedule: 't/c', tick, fence: 9, attempt: 2, event: 'start' });
    expect(lines.at(-1)?.event).toBe('end');
    expect((lines.at(-1)?.wallMs ?? 0) - (lines[0]?.wallMs ?? 0)).toBeGreaterThanOrEqual(100);
  });
});
