// `npm run chaos -- --duration SECONDS --seed N [--out FILE]`: the cluster under a seeded fault schedule.
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { sleep } from '@tickwarden/testkit';
import { ChaosRunner, planFaults } from './chaos.ts';
import { Cluster, LIBFAKETIME } from './cluster.ts';
import { ledgerSchedules, ledgerTeamYaml } from './ledger-config.ts';
import { buildReport, formatReport, reportFailures, unexplainedMisses, type TickReport } from './report.ts';

const TEAM = 'chaos';
const SCHEDULES = ['alpha', 'beta'];
/** Runs longer than the lease TTL, so the watchdog extends (and aborts) while they run. */
const LONG_TEAM = 'chaos-long';
const LONG_SCHEDULES = ['gamma'];
const LONG_CRON = '*/3 * * * * *';
const LEASE_TTL_MS = 2000;
const SLOTS = { schedulers: ['scheduler-1', 'scheduler-2', 'scheduler-3'], workers: ['worker-1', 'worker-2'] };
/** Ticks due this long after the last fault healed must run too. */
const TAIL_MS = 3000;
/** How long to wait for late runs (a job lost with a killed worker waits for BullMQ's stalled check). */
const SETTLE_MS = 75_000;

interface ChaosArgs {
  durationMs: number;
  seed: number;
  out: string;
}

function parseChaosArgs(argv: string[]): ChaosArgs | string[] {
  let values: Record<string, string | undefined>;
  try {
    ({ values } = parseArgs({ args: argv, options: { duration: { type: 'string' }, seed: { type: 'string' }, out: { type: 'string' } }, strict: true }));
  } catch (error) {
    return [(error as Error).message];
  }
  const errors: string[] = [];
  const integer = (name: string, raw: string | undefined, fallback: number, min: number): number => {
    if (raw === undefined) return fallback;
    const value = Number(raw);
    if (!Number.isSafeInteger(value) || value < min) errors.push(`--${name}: expected an integer >= ${min}, got "${raw}"`);
    return value;
  };
  const duration = integer('duration', values['duration'], 90, 10);
  const seed = integer('seed', values['seed'], 1, 0);
  const out = values['out'] ?? path.join('bench-results', `chaos-seed${seed}-${duration}s.json`);
  return errors.length > 0 ? errors : { durationMs: duration * 1000, seed, out };
}

async function main(): Promise<number> {
  const args = parseChaosArgs(process.argv.slice(2));
  if (Array.isArray(args)) {
    for (const error of args) process.stderr.write(`${error}\n`);
    process.stderr.write('usage: npm run chaos -- --duration SECONDS (>= 10, default 90) --seed N (default 1) [--out FILE]\n');
    return 2;
  }
  const clockSkew = existsSync(LIBFAKETIME);
  if (!clockSkew) console.log(`!!! ${LIBFAKETIME} is missing (apt-get install faketime): clock-skew faults are left out of this run !!!`);
  const dir = mkdtempSync(path.join(tmpdir(), 'tickwarden-chaos-'));
  const configDir = path.join(dir, 'config');
  mkdirSync(configDir);
  const ledgerFile = path.join(dir, 'ledger.txt');
  writeFileSync(path.join(configDir, `${TEAM}.yaml`), ledgerTeamYaml({ team: TEAM, names: SCHEDULES, ledgerFile, leaseTtl: `${LEASE_TTL_MS}ms` }));
  writeFileSync(path.join(configDir, `${LONG_TEAM}.yaml`), ledgerTeamYaml({ team: LONG_TEAM, names: LONG_SCHEDULES, ledgerFile, leaseTtl: `${LEASE_TTL_MS}ms`, cron: LONG_CRON, beats: 45 }));
  const schedules = [...ledgerSchedules(TEAM, SCHEDULES), ...ledgerSchedules(LONG_TEAM, LONG_SCHEDULES, LONG_CRON)];

  const cluster = await Cluster.start({ configDir });
  const interrupted = new Promise<number>((resolve) => process.once('SIGINT', () => resolve(130)));
  try {
    await Promise.all([...SLOTS.schedulers.map((name) => cluster.startApp('scheduler', name)), ...SLOTS.workers.map((name) => cluster.startApp('worker', name))]);
    const plan = planFaults({ seed: args.seed, durationMs: args.durationMs, leaseTtlMs: LEASE_TTL_MS, clockSkew });
    console.log(`chaos: seed ${args.seed}, ${args.durationMs / 1000} s, ${plan.length} faults planned, ${SCHEDULES.length} per-second schedules and one of ~2.5 s runs every 3 s, lease TTL ${LEASE_TTL_MS} ms`);
    const runner = new ChaosRunner(cluster, SLOTS, LEASE_TTL_MS, (line) => console.log(line));
    const startMs = Date.now();
    const outcome = await Promise.race([interrupted, runner.run(plan, startMs).then(() => 0)]);
    if (outcome !== 0) return outcome;
    const fromMs = startMs + 1000;
    const toMs = Date.now() + TAIL_MS;
    await sleep(TAIL_MS + 1500);
    const report = await settle(() => buildReport({ ledgerFile, records: cluster.records(), schedules, fromMs, toMs, outages: runner.outages }));
    const lines = formatReport(report);
    const failures = reportFailures(report);
    console.log(['', ...lines, `faults applied: ${runner.applied.filter((fault) => fault.applied).length} of ${plan.length} planned`, `result: ${failures.length === 0 ? 'pass' : 'FAIL'}`, ...failures].join('\n'));
    mkdirSync(path.dirname(path.resolve(args.out)), { recursive: true });
    writeFileSync(args.out, `${JSON.stringify({ seed: args.seed, durationS: args.durationMs / 1000, leaseTtlMs: LEASE_TTL_MS, summary: lines, failures, outages: runner.outages, faults: runner.applied, report: { ...report, unexplained: unexplainedMisses(report) } }, null, 2)}\n`);
    const stem = args.out.replace(/\.json$/, '');
    copyFileSync(ledgerFile, `${stem}.ledger.txt`);
    writeFileSync(`${stem}.logs.jsonl`, cluster.records().map((record) => JSON.stringify(record)).join('\n') + '\n');
    console.log(`written: ${args.out}, with the ledger (${stem}.ledger.txt) and every process's log (${stem}.logs.jsonl)`);
    return failures.length === 0 ? 0 : 1;
  } finally {
    await cluster.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Rebuilds the report until every miss is explained (late runs landed) or the settle time is up. */
async function settle(build: () => TickReport): Promise<TickReport> {
  const deadline = Date.now() + SETTLE_MS;
  let report = build();
  while (unexplainedMisses(report).length > 0 && Date.now() < deadline) {
    await sleep(1000);
    report = build();
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
