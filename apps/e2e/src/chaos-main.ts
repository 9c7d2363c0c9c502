// `npm run chaos -- --duration SECONDS --seed N [--out FILE]`: the cluster under a seeded fault schedule.
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { LIBFAKETIME, sleep } from '@tickwarden/testkit';
import { ChaosRunner, planFaults, planReplicaRestarts } from './chaos.ts';
import { Cluster, writeClockOffset } from './cluster.ts';
import { HistoryCollector } from './history-collector.ts';
import { expectedLedgerSchedule, ledgerTeamFile, type LedgerScheduleSpec } from './ledger-config.ts';
import { LedgerEndpoint } from './ledger-endpoint.ts';
import { buildReport, formatReport, reportFailures, unexplainedMisses, type TickReport } from './report.ts';

const TEAM = 'chaos';
const LEASE_TTL_MS = 3000;
const LEASE_TTL = `${LEASE_TTL_MS / 1000}s`;
const EVERY_SECOND = '* * * * * *';
const EVERY_2S = '*/2 * * * * *';
/**
 * http runs stay shorter than the lease TTL: an endpoint cannot see a frozen (SIGSTOPped) worker,
 * so a longer request would go on past the lease of a worker stopped right after sending it,
 * which no worker can prevent (the fence header is for that). Shorter, a run that a later one
 * overlaps was sent after its lease lapsed: a worker's fault.
 */
const HTTP_MAX_MS = LEASE_TTL_MS - 500;

/**
 * The schedules, as a team writes them: name, cron, overlap, leaseTtl and a handler (attempts 1,
 * no startDeadline), `catchUp` on some. Half every second, half every 2 s; one in four `allow`,
 * the rest `skip`; runs of 0.1-3 s. Plus a `cancel-previous` schedule whose period (2 s) is shorter
 * than its lease TTL, and a long-period schedule with `catchUp: 3m` (its cron is set per run).
 */
function chaosSpecs(longCron: string): LedgerScheduleSpec[] {
  const base = { leaseTtl: LEASE_TTL } as const;
  return [
    { ...base, name: 'cmd-1s', kind: 'command', cron: EVERY_SECOND, overlap: 'skip' },
    { ...base, name: 'mod-1s', kind: 'module', cron: EVERY_SECOND, overlap: 'skip', catchUp: '10s' },
    { ...base, name: 'http-1s', kind: 'http', cron: EVERY_SECOND, overlap: 'skip', maxMs: HTTP_MAX_MS },
    { ...base, name: 'cmd-1s-allow', kind: 'command', cron: EVERY_SECOND, overlap: 'allow' },
    { ...base, name: 'mod-2s', kind: 'module', cron: EVERY_2S, overlap: 'skip' },
    {
      ...base,
      name: 'http-2s-allow',
      kind: 'http',
      cron: EVERY_2S,
      overlap: 'allow',
      catchUp: '10s',
      maxMs: HTTP_MAX_MS,
    },
    { ...base, name: 'cmd-2s', kind: 'command', cron: EVERY_2S, overlap: 'skip', catchUp: '10s' },
    { ...base, name: 'http-2s', kind: 'http', cron: EVERY_2S, overlap: 'skip', maxMs: HTTP_MAX_MS },
    { ...base, name: 'mod-cancel-2s', kind: 'module', cron: EVERY_2S, overlap: 'cancel-previous' },
    { ...base, name: 'cmd-long', kind: 'command', cron: longCron, overlap: 'skip', catchUp: '3m' },
  ];
}

const SLOTS = { schedulers: ['scheduler-1', 'scheduler-2', 'scheduler-3'], workers: ['worker-1', 'worker-2'] };
/** Ticks due this long after the last fault healed must run too. */
const TAIL_MS = 3000;
/** How long to wait for late runs (a job lost with a killed worker waits for BullMQ's stalled check). */
const SETTLE_MS = 75_000;
/** The long schedule's first tick comes this long after the faults start. */
const LONG_TICK_AT_MS = 8000;
/** Its period: every 3 minutes. */
const LONG_PERIOD_MS = 180_000;
/** Time allowed for the cluster to start before the long schedule's first tick is due (about 5 s on the CI machine). */
const STARTUP_ALLOWANCE_MS = 15_000;

interface ChaosArgs {
  durationMs: number;
  seed: number;
  out: string;
}

function parseChaosArgs(argv: string[]): ChaosArgs | string[] {
  let values: Record<string, string | undefined>;
  try {
    ({ values } = parseArgs({
      args: argv,
      options: { duration: { type: 'string' }, seed: { type: 'string' }, out: { type: 'string' } },
      strict: true,
    }));
  } catch (error) {
    return [(error as Error).message];
  }
  const errors: string[] = [];
  const integer = (name: string, raw: string | undefined, fallback: number, min: number): number => {
    if (raw === undefined) return fallback;
    const value = Number(raw);
    if (!Number.isSafeInteger(value) || value < min)
      errors.push(`--${name}: expected an integer >= ${min}, got "${raw}"`);
    return value;
  };
  const duration = integer('duration', values['duration'], 90, 10);
  const seed = integer('seed', values['seed'], 1, 0);
  const out = values['out'] ?? path.join('bench-results', `chaos-seed${seed}-${duration}s.json`);
  return errors.length > 0 ? errors : { durationMs: duration * 1000, seed, out };
}

/** `S M-59/3 * * * *`: every 3 minutes, first at `firstMs` (a whole second). */
function everyThreeMinutesFrom(firstMs: number): string {
  const first = new Date(firstMs);
  return `${first.getUTCSeconds()} ${first.getUTCMinutes() % 3}-59/3 * * * *`;
}

async function main(): Promise<number> {
  const args = parseChaosArgs(process.argv.slice(2));
  if (Array.isArray(args)) {
    for (const error of args) process.stderr.write(`${error}\n`);
    process.stderr.write(
      'usage: npm run chaos -- --duration SECONDS (>= 10, default 90) --seed N (default 1) [--out FILE]\n',
    );
    return 2;
  }
  const clockSkew = existsSync(LIBFAKETIME);
  if (!clockSkew)
    console.log(
      `!!! ${LIBFAKETIME} is missing (apt-get install faketime): clock faults (skew, stepped clock) are left out of this run !!!`,
    );
  const dir = mkdtempSync(path.join(tmpdir(), 'tickwarden-chaos-'));
  const configDir = path.join(dir, 'config');
  mkdirSync(configDir);
  const ledgerFile = path.join(dir, 'ledger.txt');
  writeFileSync(ledgerFile, '');
  const endpoint = await LedgerEndpoint.start(ledgerFile);
  const longTickMs = Math.ceil((Date.now() + STARTUP_ALLOWANCE_MS) / 1000) * 1000;
  const specs = chaosSpecs(everyThreeMinutesFrom(longTickMs));
  writeFileSync(
    path.join(configDir, `${TEAM}.yaml`),
    ledgerTeamFile(TEAM, specs, { ledgerFile, httpUrl: endpoint.url }),
  );
  const schedules = specs.map((spec) => expectedLedgerSchedule(TEAM, spec));
  const clockFiles = new Map(
    clockSkew ? [...SLOTS.schedulers, ...SLOTS.workers].map((slot) => [slot, path.join(dir, `clock-${slot}.rc`)]) : [],
  );
  for (const file of clockFiles.values()) writeClockOffset(file, 0);

  const cluster = await Cluster.start({
    configDir,
    logLevel: 'info',
    roleEnv: { worker: { TICKWARDEN_WORKER_CONCURRENCY: '16' } },
  });
  const interrupted = new Promise<number>((resolve) => process.once('SIGINT', () => resolve(130)));
  let json: Record<string, unknown> | undefined;
  const stem = args.out.replace(/\.json$/, '');
  try {
    await Promise.all([
      ...SLOTS.schedulers.map((name) =>
        cluster.startApp('scheduler', name, clockFiles.has(name) ? { clockFile: clockFiles.get(name) as string } : {}),
      ),
      ...SLOTS.workers.map((name) =>
        cluster.startApp('worker', name, clockFiles.has(name) ? { clockFile: clockFiles.get(name) as string } : {}),
      ),
    ]);
    // The faults start LONG_TICK_AT_MS before the long schedule's first tick (later if the cluster was slow to start).
    const startMs = Math.max(Date.now(), longTickMs - LONG_TICK_AT_MS);
    await sleep(startMs - Date.now());
    const longTicksAtMs = Array.from(
      { length: Math.ceil(args.durationMs / LONG_PERIOD_MS) + 1 },
      (_, i) => longTickMs - startMs + i * LONG_PERIOD_MS,
    ).filter((atMs) => atMs < args.durationMs);
    const planOptions = {
      seed: args.seed,
      durationMs: args.durationMs,
      leaseTtlMs: LEASE_TTL_MS,
      clockSkew,
      longTicksAtMs,
    };
    const plan = [...planFaults(planOptions), ...planReplicaRestarts(planOptions)].sort((a, b) => a.atMs - b.atMs);
    const count = (kind: string): number => plan.filter((fault) => fault.kind === kind).length;
    console.log(
      `chaos: seed ${args.seed}, ${args.durationMs / 1000} s, ${plan.length} faults planned (${count('late-restart-scheduler')} late replica restarts, ${count('restart-all-schedulers')} restarts of every replica), ${specs.length} schedules (lease TTL ${LEASE_TTL_MS} ms), ` +
        `long schedule ${specs.at(-1)?.cron} ticks at +${longTicksAtMs.map((ms) => (ms / 1000).toFixed(1)).join(', +')} s`,
    );
    // The long schedule's ticks must run for their late restarts to show anything: no worker fault from 2 s before to 5 s after them.
    const workersSpared = longTicksAtMs.map((atMs) => ({ fromMs: atMs - 2000, toMs: atMs + 5000 }));
    const runner = new ChaosRunner(cluster, SLOTS, {
      leaseTtlMs: LEASE_TTL_MS,
      clockFiles,
      workersSpared,
      log: (line) => console.log(line),
    });
    const history = new HistoryCollector(cluster, {
      queueDownBetween: (fromMs, toMs) => runner.queueDownBetween(fromMs, toMs),
    });
    const outcome = await Promise.race([interrupted, runner.run(plan, startMs).then(() => 0)]).finally(() =>
      history.stop(),
    );
    if (outcome !== 0) return outcome;
    const fromMs = startMs + 1000;
    const toMs = Date.now() + TAIL_MS;
    await sleep(TAIL_MS + 1500);
    const report = await settle(async () => {
      await history.read();
      return buildReport({
        ledgerFile,
        records: cluster.records(),
        schedules,
        fromMs,
        toMs,
        outages: runner.outages,
        workerFaults: runner.workerFaults,
        queueWipesMs: runner.queueWipesMs,
        history: history.records(),
      });
    });
    const lines = formatReport(report);
    // Silent ticks are judged against the history too: a run that could not read it judged nothing.
    const { ok, failed, queueDown } = history.reads;
    const failures = [
      ...reportFailures(report),
      ...(failed > 0 || ok === 0 ? [`tick history: ${failed} of ${ok + failed} reads failed`] : []),
      ...runner.errors.map((error) => `harness: ${error}`),
    ];
    const { requests, completed, clientGone, rejected } = endpoint.stats;
    console.log(
      [
        '',
        ...lines,
        `http runs: ${requests} requests, ${completed} completed, ${clientGone} stopped by the worker closing the connection${rejected > 0 ? `, ${rejected} rejected (bad request)` : ''}`,
        `faults applied: ${runner.applied.filter((fault) => fault.applied).length} of ${plan.length} planned`,
        `tick history: ${history.records().length} records from ${ok} reads (${failed} failed${queueDown > 0 ? `, ${queueDown} more while the queue Redis was down` : ''})`,
        `result: ${failures.length === 0 ? 'pass' : 'FAIL'}`,
        ...failures,
      ].join('\n'),
    );
    json = {
      seed: args.seed,
      durationS: args.durationMs / 1000,
      leaseTtlMs: LEASE_TTL_MS,
      schedules: specs,
      window: { fromMs, toMs },
      summary: lines,
      failures,
      http: endpoint.stats,
      outages: runner.outages,
      workerFaults: runner.workerFaults,
      queueWipesMs: runner.queueWipesMs,
      faults: runner.applied,
      faultErrors: runner.errors,
      report: { ...report, unexplained: unexplainedMisses(report) },
    };
    return failures.length === 0 ? 0 : 1;
  } finally {
    // The report, the ledger and every process's log, whether the run passed, failed or broke.
    mkdirSync(path.dirname(path.resolve(args.out)), { recursive: true });
    if (json) writeFileSync(args.out, `${JSON.stringify(json, null, 2)}\n`);
    copyFileSync(ledgerFile, `${stem}.ledger.txt`);
    writeFileSync(
      `${stem}.logs.jsonl`,
      cluster
        .records()
        .map((record) => JSON.stringify(record))
        .join('\n') + '\n',
    );
    writeFileSync(
      `${stem}.launchers.log`,
      cluster.launcherLogs.flatMap(({ name, lines }) => lines.map((line) => `${name} ${line}`)).join('\n') + '\n',
    );
    console.log(
      `written: ${json ? `${args.out}, with ` : ''}the ledger (${stem}.ledger.txt), every process's log (${stem}.logs.jsonl) and the launchers' (${stem}.launchers.log)`,
    );
    await cluster.close();
    await endpoint.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Rebuilds the report until every miss is explained and no tick is silent (late runs landed), or the settle time is up. */
async function settle(build: () => Promise<TickReport>): Promise<TickReport> {
  const deadline = Date.now() + SETTLE_MS;
  let report = await build();
  while ((unexplainedMisses(report).length > 0 || report.silent.length > 0) && Date.now() < deadline) {
    await sleep(2000);
    report = await build();
  }
  await sleep(1000); // runs in flight write their end lines
  return build();
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
