import { randomInt } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { Writable } from 'node:stream';
import type { HandlerConfig, ScheduleConfig } from '@tickwarden/config';
import { leaseResource, queueName, tickClaim, tickJobId, type TickJobData } from '@tickwarden/contracts';
import type { Redlock } from '@tickwarden/redlock';
import { scheduleConfig, waitUntil } from '@tickwarden/testkit';
import { Job, Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { pino, type Logger } from 'pino';
import { RunLeaseValidity, type RunContext } from '../src/index.ts';

/** A pino logger whose records (parsed) are kept in memory. */
export function captureLogger(base: Record<string, unknown> = { worker: 'test-worker' }): {
  logger: Logger;
  records: Record<string, unknown>[];
} {
  const records: Record<string, unknown>[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      for (const line of chunk.toString('utf8').split('\n'))
        if (line.trim() !== '') records.push(JSON.parse(line) as Record<string, unknown>);
      callback();
    },
  });
  return { logger: pino({ level: 'debug', base }, stream), records };
}

/** A lease validity a test drives on performance.now(): valid `validForMs` from now until `extend` moves it. */
export function testLease(validForMs: number): RunLeaseValidity {
  return new RunLeaseValidity(performance.now() + validForMs, () => performance.now());
}

/** A handler's context for direct handler tests (a lease valid for an hour unless overridden). */
export function runContext(signal: AbortSignal, logger: Logger, overrides: Partial<RunContext> = {}): RunContext {
  return {
    schedule: 'team-a/job',
    tickMs: Date.UTC(2030, 0, 1, 12, 0, 0),
    fence: 1_700_000_000_000_001,
    jobId: 'team-a/job@1893499200000',
    attempt: 1,
    payload: { hello: 'world' },
    signal,
    lease: testLease(3_600_000),
    logger,
    started: () => undefined,
    ...overrides,
  };
}

/**
 * A schedule firing every second with a 1 s lease: a lost or stalled run is taken over, and a cut
 * one expires, within a test's patience.
 */
export function shortLeaseSchedule(
  id: string,
  handler: HandlerConfig,
  overrides: Partial<ScheduleConfig> = {},
): ScheduleConfig {
  return scheduleConfig({ id, handler, leaseTtlMs: 1000, ...overrides });
}

/** A command handler running `node -e script`. */
export function nodeCommand(
  script: string,
  extra: Partial<Extract<HandlerConfig, { kind: 'command' }>> = {},
): HandlerConfig {
  return {
    kind: 'command',
    argv: [process.execPath, '-e', script],
    cwd: undefined,
    env: {},
    killGraceMs: 500,
    ...extra,
  };
}

/**
 * A command handler running `/bin/sh -c script`: a shell starts within milliseconds, where Node
 * can take a second or more on a loaded machine. The environment may be empty: use absolute paths.
 */
export function shellCommand(
  script: string,
  extra: Partial<Extract<HandlerConfig, { kind: 'command' }>> = {},
): HandlerConfig {
  return nodeCommand('', { argv: ['/bin/sh', '-c', script], ...extra });
}

/**
 * A command that writes "start", then "beat" every 50 ms, and "end" after `ms` (then exits) to `file`,
 * each with its fence and wall clock. A shell: its "start" is written within milliseconds, where
 * Node's startup can take a second or more. On SIGTERM it exits once its child is reaped: an orphaned
 * child's zombie could keep the group alive a while.
 */
export function beatingCommand(file: string, ms: number): HandlerConfig {
  const now = '$(/bin/date +%s%3N)';
  return shellCommand(
    `trap 'exit 143' TERM; f='${file}'; w() { echo "$1 $TICKWARDEN_FENCE ${now}" >> "$f"; }; ` +
      `w start; end=$(( ${now} + ${ms} )); while /bin/sleep 0.05; [ "${now}" -lt "$end" ]; do w beat; done; w end`,
  );
}

/** One run of a {@link beatingCommand}'s file: its fence, first and last line (ms), and whether it ended. */
export interface BeatRun {
  fence: number;
  start: number;
  last: number;
  ended: boolean;
}

/** The runs of a {@link beatingCommand}'s lines ("<kind> <fence> <ms>"), in the order they started. */
export function beatRuns(lines: readonly string[]): BeatRun[] {
  const byFence = new Map<number, BeatRun>();
  for (const line of lines) {
    const [kind, fence, ms] = line.split(' ');
    const run = byFence.get(Number(fence)) ?? {
      fence: Number(fence),
      start: Number(ms),
      last: Number(ms),
      ended: false,
    };
    run.last = Math.max(run.last, Number(ms));
    if (kind === 'end') run.ended = true;
    byFence.set(run.fence, run);
  }
  return [...byFence.values()].sort((a, b) => a.start - b.start);
}

/**
 * Enqueues a tick's job the way a scheduler replica does: wins the tick's
 * claim with `@tickwarden/redlock` (no lease: the worker takes the schedule's
 * lease when the run starts), then adds the job with the claim's value and a
 * publication number in its data, and the schedule's attempts and backoff.
 * `beforeAdd` runs once the claim is won, before the job is added (to cut the
 * lock nodes first).
 */
export async function enqueueTick(
  redlock: Redlock,
  connection: Redis,
  schedule: ScheduleConfig,
  options: {
    tickMs?: number;
    dueMs?: number;
    delayMs?: number;
    data?: Partial<TickJobData>;
    beforeAdd?: () => Promise<unknown>;
  } = {},
): Promise<{ jobId: string; data: TickJobData }> {
  const tickMs = options.tickMs ?? Date.now();
  const resource = leaseResource(schedule.id, schedule.overlap, tickMs);
  const [claimed] = await redlock.claimBatch([{ resource, claim: tickClaim(tickMs) }], { retryCount: 0 });
  if (!claimed?.ok) throw claimed?.error ?? new Error('no claim');
  await options.beforeAdd?.();
  const data: TickJobData = {
    version: 1,
    schedule: schedule.id,
    tickMs,
    dueMs: options.dueMs ?? tickMs,
    payload: schedule.payload ?? null,
    overlap: schedule.overlap,
    lease: { resource, value: claimed.claim.value, fence: randomInt(1, 2 ** 48), ttlMs: schedule.leaseTtlMs },
    startDeadlineMs: schedule.startDeadlineMs ?? null,
    maxRuntimeMs: schedule.maxRuntimeMs ?? null,
    enqueuedBy: 'test-scheduler',
    enqueuedAtMs: Date.now(),
    ...options.data,
  };
  const jobId = tickJobId(schedule.id, tickMs);
  const queue = new Queue(queueName(schedule.queue), { connection });
  try {
    await queue.add(schedule.id, data, {
      jobId,
      delay: options.delayMs ?? 0,
      attempts: schedule.attempts,
      backoff: { type: schedule.backoff.type, delay: schedule.backoff.delayMs },
      removeOnComplete: { age: 86_400, count: 10_000 },
      removeOnFail: { age: 7 * 86_400 },
    });
  } finally {
    await queue.close();
  }
  return { jobId, data };
}

/** Waits until the job is completed or failed and returns it. */
export async function settledJob(connection: Redis, queue: string, jobId: string, timeoutMs = 20_000): Promise<Job> {
  const q = new Queue(queueName(queue), { connection });
  try {
    await waitUntil(
      async () => {
        const state = await q.getJobState(jobId);
        return state === 'completed' || state === 'failed';
      },
      `job ${jobId} settled`,
      { timeoutMs, intervalMs: 50 },
    );
    // Read after it settled: a job read earlier lacks the final fields.
    return (await Job.fromId(q, jobId)) as Job;
  } finally {
    await q.close();
  }
}

/** True while any process of the group exists. */
export function groupAlive(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ESRCH') return false;
    throw error;
  }
}

/**
 * Pids of the group's members that still run (zombies excluded), from /proc.
 * A command whose worker was SIGKILLed is reparented, and a killed orphan may
 * stay a zombie until whoever adopted it reaps it: `kill(-pgid, 0)` still
 * finds a zombie, but a zombie runs no code.
 */
export function runningMembers(pgid: number): number[] {
  const members: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
    } catch {
      continue; // exited while we looked
    }
    // "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses.
    const [state, , pgrp] = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    if (Number(pgrp) === pgid && state !== 'Z' && state !== 'X') members.push(Number(entry));
  }
  return members;
}

/** Whether a process runs (exists and is not a zombie). */
export function processRunning(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const state = stat.slice(stat.lastIndexOf(')') + 2).split(' ')[0];
    return state !== 'Z' && state !== 'X';
  } catch {
    return false;
  }
}

/** Records of one run-end log line per outcome (the records that carry `outcome`). */
export function outcomes(records: readonly Record<string, unknown>[], jobId?: string): Record<string, unknown>[] {
  return records.filter(
    (record) => typeof record['outcome'] === 'string' && (jobId === undefined || record['jobId'] === jobId),
  );
}
