// What the `tickwarden` commands do (src/cli.ts parses the arguments and dispatches). Loaded only
// when a command runs: it pulls in the config loader, ioredis, BullMQ and the lease library, which
// `--help` and `--version` do not need.
import { hostname, userInfo } from 'node:os';
import type { ConnectionOptions } from 'node:tls';
import {
  ALLOW_VARIABLE,
  DENY_VARIABLE,
  formatConfigError,
  loadConfig,
  parseDuration,
  parseHttpDestinations,
  parseSchedulerEnv,
  redactUrl,
  type ScheduleConfig,
} from '@tickwarden/config';
import { queueName } from '@tickwarden/contracts';
import {
  IoredisLockNode,
  LOCK_CLIENT_OPTIONS,
  Redlock,
  RedlockError,
  ReferenceClock,
  systemClock,
  type LockNode,
} from '@tickwarden/redlock';
import { loadRedisTls, redisOptionsFor, RunHistory } from '@tickwarden/runtime';
import { Queue } from 'bullmq';
import { Redis, type RedisOptions } from 'ioredis';
import { pino } from 'pino';
import {
  backfillSchedule,
  pauseSchedule,
  resumeSchedule,
  triggerSchedule,
  type QueueContext,
} from './control-actions.ts';
import { RedisReplicaStore } from './replica-store.ts';
import { inZone } from './in-zone.ts';
import { TickPlanner } from './tick-planner.ts';

/**
 * How long a Redis server may take to accept the connection and answer the handshake (TCP, TLS,
 * AUTH, the ready check), ms. A stopped (SIGSTOP) server accepts the TCP connection in the kernel
 * and then never answers: only this deadline ends the wait.
 */
export const CONNECT_TIMEOUT_MS = 3000;
/** How long one command to the queue Redis may take once connected, ms. */
export const COMMAND_TIMEOUT_MS = 5000;

/** A problem with the arguments' targets, the config or the environment: exit 2, no usage. */
export class ConfigError extends Error {
  readonly exitCode = 2;
}

/** Prints `line` to stdout. */
const say = (line: string) => process.stdout.write(`${line}\n`);
const messageOf = (error: unknown): string => (error instanceof Error ? error.message : String(error));

async function schedulesAt(path: string): Promise<ScheduleConfig[]> {
  const loaded = await loadConfig(path);
  if (!loaded.ok) {
    for (const error of loaded.errors) process.stderr.write(`${formatConfigError(error)}\n`);
    throw new ConfigError(`${path}: ${loaded.errors.length} config error(s)`);
  }
  return loaded.config.schedules;
}

function find(schedules: ScheduleConfig[], id: string): ScheduleConfig {
  const schedule = schedules.find((s) => s.id === id);
  if (!schedule)
    throw new ConfigError(`no schedule "${id}" (known: ${schedules.map((s) => s.id).join(', ') || 'none'})`);
  return schedule;
}

interface Environment {
  configPath: string;
  queueRedis: string;
  lockNodes: string[];
  lockQuorum: number | undefined;
  tls: ConnectionOptions | undefined;
}

/** The environment the Redis commands need, with every problem at once. */
function environment(): Environment {
  const env = parseSchedulerEnv(process.env);
  const tls = env.ok ? loadRedisTls(env.value.redisTls) : env;
  if (!env.ok || !tls.ok)
    throw new ConfigError(
      (env.ok ? [] : env.errors)
        .concat(tls.ok ? [] : tls.errors)
        .map((e) => `${e.variable}: ${e.message}`)
        .join('\n'),
    );
  return { ...env.value, tls: tls.value };
}

/** `host:port` of a Redis URL: how the lock nodes are named (a URL would carry the password). */
function hostPort(url: string): string {
  try {
    const parsed = new URL(url);
    return `${parsed.hostname}:${parsed.port || '6379'}`;
  } catch {
    return redactUrl(url);
  }
}

/**
 * A connected client, or the reason there is none: refused, timed out, TLS or AUTH failed, or a
 * server that accepted the connection and never answered within {@link CONNECT_TIMEOUT_MS}. No
 * reconnect loop; every error event is listened to, so ioredis never prints an unhandled one.
 */
async function connect(url: string, options: RedisOptions): Promise<Redis> {
  // disconnectTimeout: how long a disconnect waits for the server's side of the close before it
  // destroys the socket (ioredis: 2 s, a timer that would hold the exit; a stopped server never closes).
  const redis = new Redis(url, {
    connectTimeout: CONNECT_TIMEOUT_MS,
    ...options,
    lazyConnect: true,
    retryStrategy: () => null,
    disconnectTimeout: 100,
  });
  let lastError: Error | undefined;
  redis.on('error', (error: Error) => (lastError = error));
  let timer: NodeJS.Timeout | undefined;
  let timedOut: Error | undefined;
  const connecting = redis.connect();
  try {
    await Promise.race([
      connecting,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => {
          const stage = redis.status === 'connecting' ? 'no connection' : 'connected, but no answer';
          timedOut = new Error(
            `${stage} within ${CONNECT_TIMEOUT_MS} ms${lastError ? ` (${lastError.message})` : ' (server stopped or overloaded?)'}`,
          );
          reject(timedOut);
        }, CONNECT_TIMEOUT_MS);
      }),
    ]);
    return redis;
  } catch (error) {
    connecting.catch(() => undefined);
    if (redis.status !== 'end') redis.disconnect();
    // ioredis may reject with "Connection is closed" where the error event said why (a TLS or AUTH failure).
    throw error === timedOut ? error : (lastError ?? error);
  } finally {
    clearTimeout(timer);
  }
}

async function withQueueRedis<T>(
  { queueRedis: url, tls }: Pick<Environment, 'queueRedis' | 'tls'>,
  use: (redis: Redis) => Promise<T>,
): Promise<T> {
  const name = `the queue Redis (TICKWARDEN_QUEUE_REDIS, ${redactUrl(url)})`;
  let redis: Redis;
  try {
    redis = await connect(url, {
      maxRetriesPerRequest: 0,
      commandTimeout: COMMAND_TIMEOUT_MS,
      ...redisOptionsFor(url, tls),
    });
  } catch (error) {
    throw new Error(`cannot reach ${name}: ${messageOf(error)}`, { cause: error });
  }
  try {
    return await use(redis);
  } catch (error) {
    // The server stopped answering (ioredis' command timeout) or the connection dropped.
    if (redis.status !== 'ready' || messageOf(error) === 'Command timed out')
      throw new Error(`lost ${name}: ${messageOf(error)}`, { cause: error });
    throw error;
  } finally {
    redis.disconnect();
  }
}

/**
 * The lock nodes as a Redlock, every node connected first within {@link CONNECT_TIMEOUT_MS}: fewer
 * than a quorum reached fails the command at once, naming every node that was not and why. Nodes
 * not reached still count in the quorum (as votes that fail), as they do for the replicas.
 */
async function withLockNodes<T>(
  { lockNodes: urls, lockQuorum, tls }: Pick<Environment, 'lockNodes' | 'lockQuorum' | 'tls'>,
  use: (redlock: Redlock) => Promise<T>,
): Promise<T> {
  const quorum = lockQuorum ?? Math.floor(urls.length / 2) + 1;
  const reached = await Promise.all(
    urls.map(async (url): Promise<{ id: string; redis: Redis } | { id: string; error: string }> => {
      const id = hostPort(url);
      // As IoredisLockNode.fromUrl connects them (TLS names the server it expects), without the reconnect loop.
      const serverName = url.startsWith('rediss:')
        ? { tls: { servername: new URL(url).hostname, ...redisOptionsFor(url, tls).tls } }
        : {};
      return connect(url, { ...LOCK_CLIENT_OPTIONS, ...redisOptionsFor(url, tls), ...serverName }).then(
        (redis) => ({ id, redis }),
        (error: unknown) => ({ id, error: messageOf(error) }),
      );
    }),
  );
  const missing = reached.flatMap((node) => ('error' in node ? [`${node.id}: ${node.error}`] : []));
  const what = `the lock nodes (TICKWARDEN_LOCK_NODES: ${reached.map((node) => node.id).join(', ')})`;
  if (urls.length - missing.length < quorum) {
    for (const node of reached) if ('redis' in node) node.redis.disconnect();
    throw new Error(
      `cannot reach a quorum of ${what}: ${urls.length - missing.length} of ${urls.length} answered, ${quorum} needed; ${missing.join('; ')}`,
    );
  }
  if (missing.length > 0)
    process.stderr.write(
      `tickwarden: warning: ${missing.length} of ${what} not reached (a quorum of ${quorum} answered): ${missing.join('; ')}\n`,
    );
  const nodes = reached.map((node): LockNode =>
    'redis' in node
      ? new IoredisLockNode(node.redis, true, node.id)
      : { id: node.id, run: () => Promise.reject(new Error(node.error)), close: async () => undefined },
  );
  const redlock = new Redlock(nodes, { quorum });
  try {
    return await use(redlock);
  } catch (error) {
    if (error instanceof RedlockError) throw new Error(`${what}: ${error.message}`, { cause: error });
    throw error;
  } finally {
    await redlock.close();
  }
}

/** `validate` applies the deployment's http destination policy when its variables are set, as the replicas and workers do. */
export async function validate(path: string): Promise<number> {
  const destinations = parseHttpDestinations(process.env[ALLOW_VARIABLE], process.env[DENY_VARIABLE]);
  if (destinations.errors.length > 0)
    throw new ConfigError(destinations.errors.map((error) => `${error.variable}: ${error.message}`).join('\n'));
  const loaded = await loadConfig(path, { httpDestinations: destinations.value });
  if (!loaded.ok) {
    for (const error of loaded.errors) process.stderr.write(`${formatConfigError(error)}\n`);
    process.stderr.write(`${loaded.errors.length} error(s)\n`);
    return 1;
  }
  say(`ok: ${loaded.config.schedules.length} schedule(s) in ${loaded.config.files.length} file(s)`);
  return 0;
}

export async function next(path: string, id: string, count: number, json: boolean): Promise<number> {
  const schedule = find(await schedulesAt(path), id);
  const planner = new TickPlanner(schedule);
  let tick = planner.next(Date.now());
  for (let i = 0; i < count && tick !== undefined; i++, tick = planner.next(tick)) {
    const local = inZone(tick, schedule.timezone);
    say(
      json
        ? JSON.stringify({
            schedule: schedule.id,
            tick: new Date(tick).toISOString(),
            tickMs: tick,
            timezone: schedule.timezone,
            local,
          })
        : local,
    );
  }
  return 0;
}

/** Who runs a control command: `--by`, else TICKWARDEN_ACTOR, else `<user>@<host>` (under `kubectl exec`, the host is the pod). */
function actor(by: string | undefined): string {
  if (by !== undefined && by.trim() !== '') return by;
  const fromEnv = process.env['TICKWARDEN_ACTOR'];
  if (fromEnv !== undefined && fromEnv.trim() !== '') return fromEnv;
  let user = process.env['USER'] ?? process.env['LOGNAME'];
  try {
    user ??= userInfo().username;
  } catch {
    // A UID without a passwd entry (a container's runAsUser): the UID says who.
    user ??= `uid-${process.getuid?.() ?? 'unknown'}`;
  }
  return `${user}@${hostname()}`;
}

/** What a control command was told: why, and by whom (see actor). */
export interface Said {
  note: string;
  by: string | undefined;
}

/** The context of a control action run by the CLI: warnings (a history or audit write that failed) go to stderr. */
function cliContext(redis: Redis): QueueContext {
  return { redis, logger: pino({ level: 'warn' }, pino.destination(2)), now: Date.now };
}

export async function pause(id: string, { note, by }: Said): Promise<number> {
  const env = environment();
  const schedule = find(await schedulesAt(env.configPath), id);
  await withQueueRedis(env, (redis) => pauseSchedule(cliContext(redis), schedule, { note, by: actor(by) }));
  say(`paused ${id}`);
  return 0;
}

export async function resume(id: string, { note, by }: Said): Promise<number> {
  const env = environment();
  const schedule = find(await schedulesAt(env.configPath), id);
  const was = await withQueueRedis(env, (redis) =>
    resumeSchedule(cliContext(redis), schedule, { note, by: actor(by) }),
  );
  say(was ? `resumed ${id}` : `${id} was not paused`);
  return 0;
}

/**
 * The lock nodes' time, which every replica and worker decides by (a trigger's due time, a
 * backfill's `now`): this host's clock may be off. If no quorum answers, this host's, said.
 */
async function nodeClock(redlock: Redlock): Promise<() => number> {
  const clock = new ReferenceClock(redlock, systemClock);
  if (!(await clock.sample()))
    process.stderr.write("tickwarden: could not read the lock nodes' time: using this host's clock\n");
  return () => Math.floor(clock.wallMicros() / 1000);
}

export async function trigger(id: string, { note, by }: Said): Promise<number> {
  const env = environment();
  const schedule = find(await schedulesAt(env.configPath), id);
  // The queue Redis first: a lease is taken only when its job can be written.
  const jobId = await withQueueRedis(env, (redis) =>
    withLockNodes(env, async (redlock) =>
      triggerSchedule({ ...cliContext(redis), now: await nodeClock(redlock), redlock, publisherId: 'cli' }, schedule, {
        note,
        by: actor(by),
      }),
    ),
  );
  say(`triggered ${id}: job ${jobId}`);
  return 0;
}

/** An instant of a backfill range: ISO 8601 with a zone, `now`, or a duration before now (`now-6h`). */
function instant(option: string, raw: string, nowMs: number): number {
  if (raw === 'now') return nowMs;
  if (raw.startsWith('now-')) {
    const ago = parseDuration(raw.slice('now-'.length));
    if (ago !== undefined) return nowMs - ago;
    throw new ConfigError(`${option}: "${raw}" is not a duration before now like now-90m, now-6h or now-1d12h`);
  }
  const ms = /(Z|[+-]\d\d:?\d\d)$/i.test(raw) ? Date.parse(raw) : Number.NaN;
  if (Number.isNaN(ms))
    throw new ConfigError(
      `${option}: "${raw}" is not an ISO 8601 time with a zone (2026-11-27T22:00:00Z), "now" or a duration before now (now-6h)`,
    );
  return ms;
}

export async function backfill(
  id: string,
  range: { from: string; to: string; max: number; dryRun: boolean },
  json: boolean,
  { note, by }: Said,
): Promise<number> {
  const env = environment();
  const schedule = find(await schedulesAt(env.configPath), id);
  const requestAt = (nowMs: number) => ({
    fromMs: instant('--from', range.from, nowMs),
    toMs: instant('--to', range.to, nowMs),
    max: range.max,
    dryRun: range.dryRun,
  });
  // A bad instant is named at once, before any connection; the range is then taken on the lock nodes' time.
  requestAt(Date.now());
  const result = await withQueueRedis(env, (redis) =>
    withLockNodes(env, async (redlock) => {
      const now = await nodeClock(redlock);
      const request = requestAt(now());
      return backfillSchedule({ ...cliContext(redis), now, redlock, publisherId: 'cli' }, schedule, request, {
        note,
        by: actor(by),
      });
    }),
  );
  for (const tick of result.ticks) {
    const action = tick.action === 'fire' && range.dryRun ? 'would fire' : tick.action;
    say(
      json
        ? JSON.stringify({ schedule: id, tick: new Date(tick.tickMs).toISOString(), ...tick, action })
        : `${new Date(tick.tickMs).toISOString()}  ${action}  ${tick.why}${tick.jobId ? `  job ${tick.jobId}` : ''}`,
    );
  }
  if (!json)
    say(
      `${range.dryRun ? 'dry run: ' : ''}${id}: ${result.fired} ${range.dryRun ? 'would fire' : 'fired'}, ${result.skipped} skipped${result.failed > 0 ? `, ${result.failed} failed` : ''}`,
    );
  return result.failed > 0 ? 1 : 0;
}

export async function status(
  id: string | undefined,
  count: number,
  json: 'ticks' | 'runs' | 'actions' | undefined,
): Promise<number> {
  const env = environment();
  const all = await schedulesAt(env.configPath);
  const schedules = id ? [find(all, id)] : all;
  await withQueueRedis(env, async (redis) => {
    const store = new RedisReplicaStore(redis);
    const runs = new RunHistory(redis);
    if (json !== undefined) {
      for (const schedule of schedules) {
        const records =
          json === 'runs'
            ? await runs.read(schedule.id, count)
            : json === 'actions'
              ? await store.audits(schedule.id, count)
              : await store.history(schedule.id, count);
        for (const record of records)
          say(
            JSON.stringify({
              schedule: schedule.id,
              ...('tickMs' in record ? { tick: new Date(record.tickMs).toISOString() } : {}),
              ...record,
            }),
          );
      }
      return;
    }
    const paused = await store.paused();
    for (const schedule of schedules) {
      const planner = new TickPlanner(schedule);
      const pause = paused.get(schedule.id);
      const state = schedule.paused
        ? 'paused (config)'
        : pause
          ? `paused by ${pause.by} at ${new Date(pause.atMs).toISOString()}${pause.note ? `: ${pause.note}` : ''}`
          : 'active';
      say(`${schedule.id}  ${schedule.cron} (${schedule.timezone})  ${state}`);
      const upcoming: string[] = [];
      for (let tick = planner.next(Date.now()), i = 0; tick !== undefined && i < 3; tick = planner.next(tick), i++)
        upcoming.push(inZone(tick, schedule.timezone));
      say(`  next: ${upcoming.join(', ') || 'none'}`);
      // Read-only: the status user may not write BullMQ's meta hash (deploy/k8s/acl).
      const queue = new Queue(queueName(schedule.queue), { connection: redis, skipMetasUpdate: true });
      // Failures surface as the rejected command; an unheard 'error' event would crash the process.
      queue.on('error', () => undefined);
      try {
        for (const run of await store.history(schedule.id, count)) {
          if (run.gap) {
            say(
              `  ${new Date(run.gap.firstTickMs).toISOString()} .. ${new Date(run.tickMs).toISOString()}  missed  ${run.gap.count}${run.gap.atLeast ? ' or more' : ''} ticks while no replica ran  found by ${run.replica}`,
            );
            continue;
          }
          const job = run.jobId ? await queue.getJob(run.jobId) : undefined;
          const state = job
            ? `job ${await job.getState()}`
            : ['enqueued', 'recovered', 'triggered', 'backfilled'].includes(run.outcome)
              ? 'job removed'
              : (run.reason ?? '');
          say(
            `  ${new Date(run.tickMs).toISOString()}  ${run.outcome}  ${state}  ${run.lagMs < 0 ? `${-run.lagMs} ms ahead` : `lag ${run.lagMs} ms`}  by ${run.replica}`,
          );
        }
      } finally {
        await queue.close();
      }
      const ran = await runs.read(schedule.id, count);
      if (ran.length > 0) say('  runs:');
      for (const run of ran) {
        const result =
          run.exitCode !== undefined
            ? `  exit ${run.exitCode}`
            : run.status !== undefined
              ? `  HTTP ${run.status}`
              : '';
        say(
          `    ${new Date(run.tickMs).toISOString()}  ${run.outcome}  attempt ${run.attempt ?? '-'}  ${run.endedAtMs - run.startedAtMs} ms${result}  fence ${run.fence ?? '-'}  on ${run.worker ?? '-'}${run.error ? `  ${run.error}` : ''}`,
        );
      }
      const done = await store.audits(schedule.id, count);
      if (done.length > 0) say('  actions:');
      for (const action of done)
        say(
          `    ${new Date(action.atMs).toISOString()}  ${action.action}  by ${action.by}${action.note ? `: ${action.note}` : ''}${action.detail ? `  (${action.detail})` : ''}`,
        );
    }
  });
  return 0;
}
