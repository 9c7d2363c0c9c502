// `tickwarden`: validate config, preview ticks, pause/resume/trigger schedules and show their status.
import type { ConnectionOptions } from 'node:tls';
import { parseArgs } from 'node:util';
import { ALLOW_VARIABLE, DENY_VARIABLE, formatConfigError, loadConfig, parseHttpDestinations, parseSchedulerEnv, redactUrl, type ScheduleConfig } from '@tickwarden/config';
import { leaseResource, manualClaim, manualJobId, queueName } from '@tickwarden/contracts';
import { Redlock, systemClock } from '@tickwarden/redlock';
import { loadRedisTls, lockNodesFor, redisOptionsFor } from '@tickwarden/runtime';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { pino } from 'pino';
import { BullJobQueue } from './bull-job-queue.ts';
import { RedisReplicaStore } from './replica-store.ts';
import { TickPlanner } from './tick-planner.ts';
import { TickPublisher } from './tick-publisher.ts';
import { TickRecorder } from './tick-recorder.ts';
import { tickWindow } from './tick-window.ts';

const USAGE = `usage: tickwarden <command> [options]

  validate PATH                  check config files as CI would (no Redis needed)
  next PATH SCHEDULE [-n COUNT]  upcoming ticks of a schedule, in its time zone (default 5)
  pause SCHEDULE [--note TEXT]   stop firing a schedule, on every replica
  resume SCHEDULE                fire it again
  trigger SCHEDULE               enqueue one run now (a lease and a job, like a tick)
  status [SCHEDULE] [-n COUNT] [--json]
                                 next ticks and the last COUNT tick records (default 5) with
                                 outcome, lag and fencing token; --json: the records only, one
                                 JSON object per line, newest tick first

SCHEDULE is team/name. pause, resume, trigger and status read TICKWARDEN_CONFIG,
TICKWARDEN_QUEUE_REDIS and (trigger) TICKWARDEN_LOCK_NODES from the environment, and for
rediss:// URLs TICKWARDEN_REDIS_TLS_CA, TICKWARDEN_REDIS_TLS_CERT and TICKWARDEN_REDIS_TLS_KEY.
`;

/** The most ticks `next` lists and `status` shows per schedule (`-n`). */
const MAX_COUNT = 10_000;

/** A CLI usage error: printed with the usage, exit code 2. */
class UsageError extends Error {}

/** Prints `line` to stdout. */
const say = (line: string) => process.stdout.write(`${line}\n`);

/** A time in a zone, `2026-03-29 03:00:00 GMT+2`, as an operator reads it. */
function inZone(ms: number, timeZone: string): string {
  const parts = new Intl.DateTimeFormat('en-CA', {
    timeZone,
    year: 'numeric',
    month: '2-digit',
    day: '2-digit',
    hour: '2-digit',
    minute: '2-digit',
    second: '2-digit',
    hourCycle: 'h23',
    timeZoneName: 'short',
  }).formatToParts(new Date(ms));
  const get = (type: string) => parts.find((p) => p.type === type)?.value ?? '';
  return `${get('year')}-${get('month')}-${get('day')} ${get('hour')}:${get('minute')}:${get('second')} ${get('timeZoneName')}`;
}

async function schedulesAt(path: string): Promise<ScheduleConfig[]> {
  const loaded = await loadConfig(path);
  if (!loaded.ok) {
    for (const error of loaded.errors) process.stderr.write(`${formatConfigError(error)}\n`);
    throw new UsageError(`${path}: ${loaded.errors.length} config error(s)`);
  }
  return loaded.config.schedules;
}

function find(schedules: ScheduleConfig[], id: string): ScheduleConfig {
  const schedule = schedules.find((s) => s.id === id);
  if (!schedule) throw new UsageError(`no schedule "${id}" (known: ${schedules.map((s) => s.id).join(', ') || 'none'})`);
  return schedule;
}

/** The environment the Redis commands need, with every problem at once. */
function environment(): { configPath: string; queueRedis: string; lockNodes: string[]; lockQuorum: number | undefined; tls: ConnectionOptions | undefined } {
  const env = parseSchedulerEnv(process.env);
  const tls = env.ok ? loadRedisTls(env.value.redisTls) : env;
  if (!env.ok || !tls.ok) throw new UsageError((env.ok ? [] : env.errors).concat(tls.ok ? [] : tls.errors).map((e) => `${e.variable}: ${e.message}`).join('\n'));
  return { ...env.value, tls: tls.value };
}

async function withQueueRedis<T>({ queueRedis: url, tls }: { queueRedis: string; tls: ConnectionOptions | undefined }, use: (redis: Redis) => Promise<T>): Promise<T> {
  // No reconnect loop: a refused connection or TLS handshake fails the command instead of hanging it.
  const redis = new Redis(url, { maxRetriesPerRequest: 1, lazyConnect: true, retryStrategy: () => null, connectTimeout: 5000, ...redisOptionsFor(url, tls) });
  // The error says why; unheard, ioredis prints it to stderr as "Unhandled error event".
  let lastError: Error | undefined;
  redis.on('error', (error: Error) => (lastError = error));
  try {
    await redis.connect();
  } catch (error) {
    throw new Error(`cannot reach the queue Redis (TICKWARDEN_QUEUE_REDIS, ${redactUrl(url)}): ${(lastError ?? (error as Error)).message}`, { cause: error });
  }
  try {
    return await use(redis);
  } finally {
    redis.disconnect();
  }
}

/** `validate` applies the deployment's http destination policy when its variables are set, as the replicas and workers do. */
async function validate(path: string): Promise<number> {
  const destinations = parseHttpDestinations(process.env[ALLOW_VARIABLE], process.env[DENY_VARIABLE]);
  if (destinations.errors.length > 0) throw new UsageError(destinations.errors.map((error) => `${error.variable}: ${error.message}`).join('\n'));
  const loaded = await loadConfig(path, { httpDestinations: destinations.value });
  if (!loaded.ok) {
    for (const error of loaded.errors) process.stderr.write(`${formatConfigError(error)}\n`);
    process.stderr.write(`${loaded.errors.length} error(s)\n`);
    return 1;
  }
  say(`ok: ${loaded.config.schedules.length} schedule(s) in ${loaded.config.files.length} file(s)`);
  return 0;
}

async function next(path: string, id: string, count: number): Promise<number> {
  const schedule = find(await schedulesAt(path), id);
  const planner = new TickPlanner(schedule);
  let tick = planner.next(Date.now());
  for (let i = 0; i < count && tick !== undefined; i++, tick = planner.next(tick)) say(inZone(tick, schedule.timezone));
  return 0;
}

async function pause(id: string, note: string): Promise<number> {
  const env = environment();
  find(await schedulesAt(env.configPath), id);
  await withQueueRedis(env, (redis) => new RedisReplicaStore(redis).pause(id, { by: process.env['USER'] ?? 'cli', atMs: Date.now(), note }));
  say(`paused ${id}`);
  return 0;
}

async function resume(id: string): Promise<number> {
  const env = environment();
  const was = await withQueueRedis(env, (redis) => new RedisReplicaStore(redis).resume(id));
  say(was ? `resumed ${id}` : `${id} was not paused`);
  return 0;
}

async function trigger(id: string): Promise<number> {
  const env = environment();
  const schedule = find(await schedulesAt(env.configPath), id);
  const redlock = new Redlock(lockNodesFor(env.lockNodes, env.tls), { quorum: env.lockQuorum });
  try {
    const now = Date.now();
    const planner = new TickPlanner(schedule);
    const next = planner.next(now);
    const nextDueMs = next === undefined ? undefined : planner.dueMs(next);
    const tick = { schedule, tickMs: now, dueMs: now, nextDueMs, jobId: manualJobId(schedule.id, now), ...tickWindow(schedule, now, nextDueMs) };
    const lease = await redlock.acquire(leaseResource(schedule.id, schedule.overlap, now), schedule.leaseTtlMs, { claim: manualClaim(now), claimRetentionMs: tick.retentionMs });
    const published = await withQueueRedis(env, async (redis) => {
      const queue = new BullJobQueue(redis, systemClock, 'cli');
      // Warnings (a history write that failed) go to stderr.
      const recorder = new TickRecorder({ replicaId: 'cli', store: new RedisReplicaStore(redis), logger: pino({ level: 'warn' }, pino.destination(2)), now: Date.now });
      try {
        // The one path that publishes a tick's job, as the replicas do.
        const [outcome] = await new TickPublisher({ replicaId: 'cli', leases: redlock, queue, recorder, now: Date.now }).publish([{ tick, lease }], 'triggered');
        await recorder.flush();
        return outcome;
      } finally {
        await queue.close();
      }
    });
    if (published !== 'published') throw new Error(`could not enqueue the run of ${id} (${published}): see the queue Redis`);
    say(`triggered ${id}: job ${tick.jobId}, fence ${lease.fence}`);
    return 0;
  } finally {
    await redlock.close();
  }
}

async function status(id: string | undefined, count: number, json: boolean): Promise<number> {
  const env = environment();
  const all = await schedulesAt(env.configPath);
  const schedules = id ? [find(all, id)] : all;
  await withQueueRedis(env, async (redis) => {
    const store = new RedisReplicaStore(redis);
    if (json) {
      for (const schedule of schedules) for (const record of await store.history(schedule.id, count)) say(JSON.stringify({ schedule: schedule.id, tick: new Date(record.tickMs).toISOString(), ...record }));
      return;
    }
    const paused = await store.paused();
    for (const schedule of schedules) {
      const planner = new TickPlanner(schedule);
      const pause = paused.get(schedule.id);
      const state = schedule.paused ? 'paused (config)' : pause ? `paused by ${pause.by} at ${new Date(pause.atMs).toISOString()}${pause.note ? `: ${pause.note}` : ''}` : 'active';
      say(`${schedule.id}  ${schedule.cron} (${schedule.timezone})  ${state}`);
      const upcoming: string[] = [];
      for (let tick = planner.next(Date.now()), i = 0; tick !== undefined && i < 3; tick = planner.next(tick), i++) upcoming.push(inZone(tick, schedule.timezone));
      say(`  next: ${upcoming.join(', ') || 'none'}`);
      // Read-only: the status user may not write BullMQ's meta hash (deploy/k8s/acl).
      const queue = new Queue(queueName(schedule.queue), { connection: redis, skipMetasUpdate: true });
      try {
        const runs = await store.history(schedule.id, count);
        for (const run of runs) {
          if (run.gap) {
            say(`  ${new Date(run.gap.firstTickMs).toISOString()} .. ${new Date(run.tickMs).toISOString()}  missed  ${run.gap.count}${run.gap.atLeast ? ' or more' : ''} ticks while no replica ran  found by ${run.replica}`);
            continue;
          }
          const job = run.jobId ? await queue.getJob(run.jobId) : undefined;
          const state = job ? `job ${await job.getState()}` : run.outcome === 'enqueued' || run.outcome === 'recovered' ? 'job removed' : (run.reason ?? '');
          say(`  ${new Date(run.tickMs).toISOString()}  ${run.outcome}  ${state}  ${run.lagMs < 0 ? `${-run.lagMs} ms ahead` : `lag ${run.lagMs} ms`}  fence ${run.fence ?? '-'}  by ${run.replica}`);
        }
      } finally {
        await queue.close();
      }
    }
  });
  return 0;
}

async function run(argv: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    strict: true,
    options: { n: { type: 'string', short: 'n' }, note: { type: 'string' }, json: { type: 'boolean' }, help: { type: 'boolean', short: 'h' } },
  });
  const [command, ...rest] = positionals;
  const need = (count: number) => {
    if (rest.length !== count) throw new UsageError(`${command} takes ${count} argument(s), got ${rest.length}`);
    return rest as string[];
  };
  if (values.help || !command) {
    say(USAGE);
    return values.help ? 0 : 2;
  }
  const count = (): number => {
    const n = values.n === undefined ? 5 : Number(values.n);
    if (!Number.isInteger(n) || n < 1 || n > MAX_COUNT) throw new UsageError(`-n must be a whole number from 1 to ${MAX_COUNT}, got "${values.n}"`);
    return n;
  };
  switch (command) {
    case 'validate':
      return validate(need(1)[0] as string);
    case 'next': {
      const [path, id] = need(2) as [string, string];
      return next(path, id, count());
    }
    case 'pause':
      return pause(need(1)[0] as string, values.note ?? '');
    case 'resume':
      return resume(need(1)[0] as string);
    case 'trigger':
      return trigger(need(1)[0] as string);
    case 'status':
      if (rest.length > 1) throw new UsageError(`status takes at most 1 argument, got ${rest.length}`);
      return status(rest[0], count(), values.json ?? false);
    default:
      throw new UsageError(`unknown command "${command}"`);
  }
}

run(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    const usage = error instanceof UsageError || (error instanceof Error && 'code' in error && String(error.code).startsWith('ERR_PARSE_ARGS'));
    process.stderr.write(`tickwarden: ${error instanceof Error ? error.message : String(error)}\n`);
    if (usage) process.stderr.write(`\n${USAGE}`);
    process.exitCode = usage ? 2 : 1;
  },
);
