import { LATE_TICK_WINDOW_MS } from '@tickwarden/contracts';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { FAULT_KINDS, FAULT_WEIGHTS, LATE_RESTART_AFTER_MS, planFaults, type PlannedFault } from '../src/index.ts';

const CHAOS = fileURLToPath(new URL('../src/chaos-main.ts', import.meta.url));

function runChaos(args: string[]): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--conditions=@tickwarden/source', CHAOS, ...args], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
    child.once('exit', (code) => resolve({ code, output }));
  });
}

describe('the chaos suite', () => {
  it('draws the same fault plan from the same seed, and another from another seed', () => {
    const options = { durationMs: 90_000, leaseTtlMs: 3000, clockSkew: true, longTicksAtMs: [8000] };
    expect(planFaults({ ...options, seed: 1 })).toEqual(planFaults({ ...options, seed: 1 }));
    expect(planFaults({ ...options, seed: 2 })).not.toEqual(planFaults({ ...options, seed: 1 }));
    const kinds = new Set(planFaults({ ...options, seed: 1 }).map((fault) => fault.kind));
    expect(kinds.size).toBeGreaterThanOrEqual(8);
    // Over a few seeds, every kind is drawn; without libfaketime, no clock fault is.
    const drawn = new Set<string>(
      [1, 2, 3, 4, 5].flatMap((seed) => planFaults({ ...options, seed }).map((fault) => fault.kind)),
    );
    expect([...FAULT_KINDS, 'late-restart-scheduler'].filter((kind) => !drawn.has(kind))).toEqual([]);
    const noClock = planFaults({ ...options, seed: 1, clockSkew: false }).map((fault) => fault.kind);
    expect(noClock.filter((kind) => kind === 'skew-scheduler' || kind.startsWith('step-clock'))).toEqual([]);
  });

  it('plans a replica restart 75 s after each tick of the long schedule (past the job retention), and empty lock-node restarts after the lease TTL plus the late-tick window', () => {
    const plan = planFaults({
      seed: 7,
      durationMs: 300_000,
      leaseTtlMs: 3000,
      clockSkew: true,
      longTicksAtMs: [8000, 188_000],
    });
    expect(plan.filter((fault) => fault.kind === 'late-restart-scheduler').map((fault) => fault.atMs)).toEqual([
      83_000, 263_000,
    ]);
    expect(LATE_RESTART_AFTER_MS).toBeGreaterThan(2 * 3000 + 60_000);
    expect(plan.map((fault) => fault.atMs)).toEqual([...plan.map((fault) => fault.atMs)].sort((a, b) => a - b));
    const empty = [7, 8, 9, 10]
      .flatMap((seed) =>
        planFaults({ seed, durationMs: 300_000, leaseTtlMs: 3000, clockSkew: true, longTicksAtMs: [] }),
      )
      .filter((fault) => fault.kind === 'kill-lock-nodes' && fault.restart === 'empty');
    expect(empty.length).toBeGreaterThan(0);
    expect(empty.every((fault) => fault.durationMs >= 3000 + LATE_TICK_WINDOW_MS + 1000)).toBe(true);
    // A fault every 1-4 s.
    const gaps = plan
      .filter((fault) => fault.kind !== 'late-restart-scheduler')
      .map((fault, i, all) => fault.atMs - (all[i - 1]?.atMs ?? fault.atMs));
    expect(Math.max(...gaps)).toBeLessThanOrEqual(4000);
  });

  it('draws the queue Redis faults with their durations and restart modes, a few of each in a 90 s run, and every kind in every bag of kinds', () => {
    const options = { leaseTtlMs: 3000, clockSkew: true, longTicksAtMs: [8000] };
    const queueKinds = ['kill-queue-redis', 'pause-queue-redis', 'latency-queue-redis', 'partition-queue'] as const;
    const count = (plan: PlannedFault[], kind: string): number => plan.filter((fault) => fault.kind === kind).length;
    // The CI run (seed 1, 90 s): each queue Redis fault at least twice, and every kind at least once.
    const ci = planFaults({ ...options, seed: 1, durationMs: 90_000 });
    for (const kind of queueKinds) expect(count(ci, kind), kind).toBeGreaterThanOrEqual(2);
    expect(FAULT_KINDS.filter((kind) => count(ci, kind) === 0)).toEqual([]);
    expect(new Set(ci.filter((fault) => fault.kind === 'kill-queue-redis').map((fault) => fault.restart))).toEqual(
      new Set(['aof', 'empty']),
    );
    // Any seed: a bag holds every kind FAULT_WEIGHTS times, so the first bag's worth of faults has each that often.
    const bagSize = FAULT_KINDS.reduce((sum, kind) => sum + FAULT_WEIGHTS[kind], 0);
    for (const seed of [2, 3, 4, 42]) {
      const first = planFaults({ ...options, seed, durationMs: 300_000, longTicksAtMs: [] }).slice(0, bagSize);
      for (const kind of FAULT_KINDS) expect(count(first, kind), `seed ${seed} ${kind}`).toBe(FAULT_WEIGHTS[kind]);
    }
    // Durations (away from the run's end, where they are cut to end by then) and restart modes, over a long run.
    const long = planFaults({ ...options, seed: 42, durationMs: 600_000 }).filter((fault) => fault.atMs < 590_000);
    const of = (kind: string): PlannedFault[] => long.filter((fault) => fault.kind === kind);
    const within = (faults: PlannedFault[], min: number, max: number): void => {
      expect(faults.length).toBeGreaterThan(5);
      for (const fault of faults)
        expect(fault.durationMs, `${fault.kind} at ${fault.atMs}`).toBeGreaterThanOrEqual(min);
      for (const fault of faults) expect(fault.durationMs, `${fault.kind} at ${fault.atMs}`).toBeLessThanOrEqual(max);
    };
    within(
      of('kill-queue-redis').filter((fault) => fault.restart === 'aof'),
      1000,
      6000,
    );
    within(
      of('kill-queue-redis').filter((fault) => fault.restart === 'empty'),
      1000,
      3000,
    );
    expect(of('kill-queue-redis').every((fault) => fault.restart === 'aof' || fault.restart === 'empty')).toBe(true);
    within(of('pause-queue-redis'), 1000, 5000);
    within(of('latency-queue-redis'), 2000, 8000);
    expect(of('latency-queue-redis').every((fault) => fault.magnitude >= 10 && fault.magnitude <= 60)).toBe(true);
    within(of('partition-queue'), 2000, 8000);
  });

  it('rejects bad arguments naming them, before starting anything', async () => {
    const { code, output } = await runChaos(['--duration', 'soon', '--seed=-1']);
    expect(code).toBe(2);
    expect(output).toContain('--duration: expected an integer >= 10, got "soon"');
    expect(output).toContain('--seed: expected an integer >= 0, got "-1"');
    const unknown = await runChaos(['--durration', '90']);
    expect(unknown.code).toBe(2);
    expect(unknown.output).toContain("Unknown option '--durration'");
  });

  it(
    'a seeded 90-second run: no duplicate, overlap, fence regression, unexplained miss or silent tick; start lag p99 within leaseTtl + 1 s',
    { timeout: 300_000 },
    async () => {
      const dir = mkdtempSync(path.join(tmpdir(), 'tickwarden-chaos-test-'));
      const out = path.join(dir, 'chaos.json');
      let passed = false;
      try {
        const { code, output } = await runChaos(['--duration', '90', '--seed', '1', '--out', out]);
        console.log(output);
        const result = JSON.parse(readFileSync(out, 'utf8')) as {
          summary: string[];
          failures: string[];
          faults: { applied: boolean }[];
        };
        expect(result.failures).toEqual([]);
        expect(code).toBe(0);
        for (const figure of ['duplicates: 0', 'overlaps: 0', 'fence regressions: 0', 'silent: 0'])
          expect(result.summary).toContain(figure);
        expect(result.summary.find((line) => line.startsWith('missed:'))).toMatch(/unexplained: 0\)$/);
        expect(result.summary.find((line) => line.startsWith('ticks run:'))).toMatch(/^ticks run: [1-9]\d+$/);
        expect(result.faults.filter((fault) => fault.applied).length).toBeGreaterThanOrEqual(15);
        passed = true;
      } finally {
        // A failed run keeps the report, the ledger and every process's log for inspection.
        if (passed) rmSync(dir, { recursive: true, force: true });
        else console.log(`chaos run kept for inspection: ${dir}`);
      }
    },
  );
});
