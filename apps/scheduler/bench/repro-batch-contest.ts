/**
 * Reproduction for the scheduler benchmark's findings (not part of `npm run bench:scheduler`):
 * the tick contest of `Scheduler.#contest`, alone: N ticks due at the same instant, each
 * contender calls `redlock.acquireBatch` of N `{ resource: run:<id>@<tick>, claim: tick:<tick> }`
 * with the scheduler's contest settings, on 5 fresh lock nodes. Contenders are separate OS
 * processes (as replicas are), each with its own Redlock; all fire at the same wall-clock
 * instant, one round per second. For every tick the parent counts the contenders that won; a
 * tick no contender won is lost to the contest (the scheduler then logs `lost-race` on every
 * replica, and recovery enqueues it seconds later as `recovered`).
 *
 *   node --conditions=@tickwarden/source apps/scheduler/bench/repro-batch-contest.ts [sizes...]
 *
 * Default sizes: 1000. REPRO_ROUNDS (default 10) rounds per size; REPRO_CONTENDERS (default 3);
 * REPRO_NODE_TIMEOUT_MS sets the per-node budget (unset: the scheduler's
 * `contestNodeTimeoutMs(30 s lease, batch)`). What it found: apps/scheduler/BENCHMARK.md ("The batch
 * contest, alone").
 */
import { spawn } from 'node:child_process';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';
import { Redlock } from '@tickwarden/redlock';
import { sleep, startRedisNodes } from '@tickwarden/testkit';
import { contestNodeTimeoutMs } from '../src/index.ts';

/** The scheduler's contest settings (apps/scheduler/src/scheduler.ts, CONTEST). */
const CONTEST = { retryCount: 4, retryDelayMs: 15, retryJitterMs: 30, yieldToWaiters: false };
const TTL_MS = 30_000;

interface RoundReport {
  round: number;
  ms: number;
  /** Per tick: `ok`, or the error's code. */
  outcomes: string[];
  /** The first failure of each error code: message and per-node causes. */
  examples: Record<string, string>;
}

const requestsFor = (size: number, tickMs: number) =>
  Array.from({ length: size }, (_, i) => ({
    resource: `run:bench/s${String(i).padStart(5, '0')}@${tickMs}`,
    claim: `tick:${tickMs}`,
  }));

async function child(): Promise<void> {
  const urls = (process.env['REPRO_URLS'] ?? '').split(',');
  const size = Number(process.env['REPRO_SIZE']);
  const firstTick = Number(process.env['REPRO_FIRST_TICK']);
  const rounds = Number(process.env['REPRO_ROUNDS']);
  const redlock = new Redlock(urls);
  const nodeTimeoutMs = Number(process.env['REPRO_NODE_TIMEOUT_MS']) || contestNodeTimeoutMs(TTL_MS, size);
  try {
    for (let round = 0; round < rounds; round++) {
      const tickMs = firstTick + round * 1000;
      await sleep(Math.max(0, tickMs - Date.now()));
      const started = performance.now();
      const results = await redlock.acquireBatch(requestsFor(size, tickMs), TTL_MS, { ...CONTEST, nodeTimeoutMs });
      const examples: Record<string, string> = {};
      const outcomes = results.map((r) => {
        if (r.ok) return 'ok';
        const code = (r.error as { code?: string }).code ?? r.error.name;
        examples[code] ??=
          `${r.error.message} causes=${JSON.stringify(Object.fromEntries([...r.error.nodeCauses].map(([node, cause]) => [node, cause instanceof Error ? cause.message : cause])))}`;
        return code;
      });
      const report: RoundReport = { round, ms: Math.round(performance.now() - started), outcomes, examples };
      process.stdout.write(`${JSON.stringify(report)}\n`);
    }
  } finally {
    await redlock.close();
  }
}

async function parent(): Promise<void> {
  const sizes = process.argv
    .slice(2)
    .map(Number)
    .filter((n) => n > 0);
  const rounds = Number(process.env['REPRO_ROUNDS'] ?? 10) || 10;
  const contenders = Number(process.env['REPRO_CONTENDERS'] ?? 3) || 3;
  const nodes = await startRedisNodes({ count: 5, aof: false });
  const children: ReturnType<typeof spawn>[] = [];
  const kill = (): void => {
    for (const c of children) c.kill('SIGKILL');
  };
  process.once('SIGINT', () => {
    kill();
    void nodes.close().finally(() => process.exit(130));
  });
  try {
    for (const size of sizes.length > 0 ? sizes : [1000]) {
      // Start-up (TypeScript, clients) takes a while: the first tick is 3 s ahead.
      const firstTick = Math.ceil((Date.now() + 3000) / 1000) * 1000;
      const reports = await Promise.all(
        Array.from({ length: contenders }, (_, c) => {
          const proc = spawn(process.execPath, ['--conditions=@tickwarden/source', fileURLToPath(import.meta.url)], {
            env: {
              ...process.env,
              REPRO_CHILD: '1',
              REPRO_URLS: nodes.urls.join(','),
              REPRO_SIZE: String(size),
              REPRO_FIRST_TICK: String(firstTick),
              REPRO_ROUNDS: String(rounds),
            },
            stdio: ['ignore', 'pipe', 'inherit'],
          });
          children.push(proc);
          const lines: RoundReport[] = [];
          readline
            .createInterface({ input: proc.stdout })
            .on('line', (line) => lines.push(JSON.parse(line) as RoundReport));
          return new Promise<{ c: number; lines: RoundReport[]; code: number | null }>((resolve) =>
            proc.once('exit', (code) => resolve({ c, lines, code })),
          );
        }),
      );
      let lost = 0;
      for (let round = 0; round < rounds; round++) {
        const perContender = reports.map((r) => r.lines.find((l) => l.round === round));
        let noWinner = 0;
        let multiWinner = 0;
        let example: string | undefined;
        for (let i = 0; i < size; i++) {
          const winners = perContender.filter((l) => l?.outcomes[i] === 'ok').length;
          if (winners === 0) {
            noWinner++;
            example ??= perContender
              .map(
                (l, c) =>
                  `contender ${c}: ${l?.outcomes[i]}: ${l ? (l.examples[l.outcomes[i] ?? ''] ?? '') : 'no report'}`,
              )
              .join('\n      ');
          }
          if (winners > 1) multiWinner++;
        }
        lost += noWinner;
        const summary = perContender.map((l) => {
          if (!l) return 'no report';
          const counts: Record<string, number> = {};
          for (const o of l.outcomes) counts[o] = (counts[o] ?? 0) + 1;
          return `${l.ms} ms ${JSON.stringify(counts)}`;
        });
        process.stdout.write(
          `${size} ticks, round ${round + 1}: ${noWinner} won by nobody, ${multiWinner} by several; ${summary.join('; ')}\n`,
        );
        if (example) process.stdout.write(`    first tick won by nobody:\n      ${example}\n`);
      }
      const exits = reports.filter((r) => r.code !== 0).map((r) => `contender ${r.c} exited ${r.code}`);
      process.stdout.write(
        `=> ${size} ticks x ${rounds} rounds, ${contenders} processes: ${lost} ticks won by nobody${exits.length ? `; ${exits.join(', ')}` : ''}\n`,
      );
    }
  } finally {
    kill();
    await nodes.close();
  }
}

await (process.env['REPRO_CHILD'] ? child() : parent());
