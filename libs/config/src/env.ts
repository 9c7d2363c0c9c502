import { hostname } from 'node:os';
import { formatDuration, parseDuration } from './duration.ts';
import { ALLOW_VARIABLE, DENY_VARIABLE, parseHttpDestinations, type HttpDestinations } from './http-destinations.ts';
import type { EnvError, EnvResult } from './errors.ts';
import { redactUrl } from './redact.ts';
import { QUEUE_PATTERN } from './schema.ts';

/** pino's levels. */
export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

interface CommonEnv {
  /** `TICKWARDEN_CONFIG`: a YAML file or a directory of them (not checked for existence here). */
  configPath: string;
  /** `TICKWARDEN_LOCK_NODES`: the Redlock masters' URLs, trimmed, in the order given. */
  lockNodes: string[];
  /** `TICKWARDEN_LOCK_QUORUM`; `undefined` means a majority of `lockNodes`. */
  lockQuorum: number | undefined;
  /** `TICKWARDEN_LOCK_ALLOW_SINGLE=1`: one lock node is accepted (development; the process warns at start). */
  lockAllowSingle: boolean;
  /** `TICKWARDEN_QUEUE_REDIS`: the BullMQ Redis. */
  queueRedis: string;
  /** `TICKWARDEN_HTTP_PORT` (health and metrics); 0 picks a free port. */
  httpPort: number;
  /** `LOG_LEVEL`. */
  logLevel: LogLevel;
  /** `TICKWARDEN_HTTP_ALLOW` and `TICKWARDEN_HTTP_DENY`: where http handlers may connect (config validation and runs). */
  httpDestinations: HttpDestinations;
  /** `TICKWARDEN_REDIS_TLS_*`: the files every `rediss://` connection (lock nodes and queue) uses; read once at start. */
  redisTls: RedisTlsFiles;
}

/** PEM files for `rediss://` connections; each undefined when its variable is unset. */
export interface RedisTlsFiles {
  /** `TICKWARDEN_REDIS_TLS_CA`: the CA bundle that signed the servers' certificates, instead of Node's default CAs. */
  ca: string | undefined;
  /** `TICKWARDEN_REDIS_TLS_CERT`: a client certificate (servers with `tls-auth-clients yes`); with `key`. */
  cert: string | undefined;
  /** `TICKWARDEN_REDIS_TLS_KEY`: its private key; with `cert`. */
  key: string | undefined;
}

/** The variables of {@link RedisTlsFiles}, by field. */
export const REDIS_TLS_VARIABLES = {
  ca: 'TICKWARDEN_REDIS_TLS_CA',
  cert: 'TICKWARDEN_REDIS_TLS_CERT',
  key: 'TICKWARDEN_REDIS_TLS_KEY',
} as const;

/**
 * Default of `TICKWARDEN_CONTEST_LEAD`, ms: longer than contesting and enqueueing 10,000 ticks due
 * at one instant takes, and half a second off whole seconds, so that the contests of ticks due
 * later run between the starts of earlier ones instead of competing with them
 * (apps/scheduler/BENCHMARK.md).
 */
export const DEFAULT_CONTEST_LEAD_MS = 9500;

export interface SchedulerEnv extends CommonEnv {
  /** `TICKWARDEN_REPLICA_ID`, default `os.hostname()` (the pod name on Kubernetes). */
  replicaId: string;
  /** `TICKWARDEN_CONTEST_LEAD`: how long before its run is due a tick is contested and enqueued, ms; `undefined` means DEFAULT_CONTEST_LEAD_MS. */
  contestLeadMs: number | undefined;
  /** `TICKWARDEN_CONTROL_TOKEN_FILE`: the file holding the web console's control token (a mounted Secret), read once at start; `undefined`: the console is read-only. */
  controlTokenFile: string | undefined;
}

export interface WorkerEnv extends CommonEnv {
  /** `TICKWARDEN_WORKER_CONCURRENCY`: jobs run at once, default 10. */
  concurrency: number;
  /** `TICKWARDEN_QUEUES`: the queues to consume; `undefined` means every queue of the configuration. */
  queues: string[] | undefined;
  /** `TICKWARDEN_SHUTDOWN_GRACE`: how long running jobs may finish after SIGTERM, ms; default 20 s (inside Kubernetes' 30 s). */
  shutdownGraceMs: number;
  /**
   * `TICKWARDEN_STALLED_INTERVAL`: how often BullMQ's stalled check looks for jobs whose worker died, ms;
   * default DEFAULT_STALLED_INTERVAL_MS. A job lost with its worker comes back after its lock and about two intervals (its lease wait still applies).
   */
  stalledIntervalMs: number;
  /** `TICKWARDEN_SECRETS_DIR`: where the Secrets that schedules' `{ secret, key }` values name are mounted, one directory per Secret; default DEFAULT_SECRETS_DIR. */
  secretsDir: string;
  /** `TICKWARDEN_LAUNCHER_SOCKET`: the launcher's unix socket, through which command and module programs start (under the launcher's user); `undefined`: the worker starts them itself. */
  launcherSocket: string | undefined;
}

/** The launcher's environment (`apps/worker`, launcher-main.ts): nothing else, no credential. */
export interface LauncherEnv {
  /** `TICKWARDEN_LAUNCHER_SOCKET`: the unix socket it listens on (created, made connectable by any user of the directory). */
  socketPath: string;
  logLevel: LogLevel;
}

/** The variable naming the console's control token file, read by the scheduler (the file is read at start, by the scheduler). */
export const CONTROL_TOKEN_FILE_VARIABLE = 'TICKWARDEN_CONTROL_TOKEN_FILE';

/** The variable naming the launcher's socket, read by the worker and the launcher. */
export const LAUNCHER_SOCKET_VARIABLE = 'TICKWARDEN_LAUNCHER_SOCKET';

/**
 * How often a worker's BullMQ stalled check runs unless TICKWARDEN_STALLED_INTERVAL says otherwise,
 * ms: a job whose worker died comes back within its lock and about two of these, inside its start
 * deadline. One short script per queue and interval, shared by all workers.
 */
export const DEFAULT_STALLED_INTERVAL_MS = 2500;

/** Where a worker reads `{ secret, key }` values unless TICKWARDEN_SECRETS_DIR says otherwise. */
export const DEFAULT_SECRETS_DIR = '/var/run/tickwarden/secrets';

type Env = Readonly<Record<string, string | undefined>>;

/**
 * Reads the scheduler's environment. Reports every problem at once; no message contains a URL's
 * password. Empty and blank values count as unset; values are trimmed.
 */
export function parseSchedulerEnv(env: Env): EnvResult<SchedulerEnv> {
  const reader = new EnvReader(env);
  const common = readCommon(reader, 8080);
  const replicaId = reader.get('TICKWARDEN_REPLICA_ID') ?? hostname();
  if (!/^[^\s\p{Cc}]+$/u.test(replicaId)) {
    reader.fail(
      'TICKWARDEN_REPLICA_ID',
      replicaId === ''
        ? 'is not set and os.hostname() is empty: set it to a name unique among the replicas'
        : `expected a name without spaces or control characters, got ${quote(replicaId)}`,
    );
  }
  const contestLeadMs =
    reader.get('TICKWARDEN_CONTEST_LEAD') === undefined
      ? undefined
      : readDuration(reader, 'TICKWARDEN_CONTEST_LEAD', 0, 0, ENV_DURATION_MAX_MS.TICKWARDEN_CONTEST_LEAD);
  const controlTokenFile = reader.get(CONTROL_TOKEN_FILE_VARIABLE);
  if (controlTokenFile !== undefined && !controlTokenFile.startsWith('/'))
    reader.fail(CONTROL_TOKEN_FILE_VARIABLE, `expected an absolute path, got ${quote(controlTokenFile)}`);
  return reader.result(() => ({ ...common(), replicaId, contestLeadMs, controlTokenFile }));
}

/** Reads the worker's environment, like `parseSchedulerEnv`. */
export function parseWorkerEnv(env: Env): EnvResult<WorkerEnv> {
  const reader = new EnvReader(env);
  const common = readCommon(reader, 8081);
  const concurrency = reader.integer(
    'TICKWARDEN_WORKER_CONCURRENCY',
    10,
    1,
    Number.MAX_SAFE_INTEGER,
    'an integer of at least 1',
  );
  const queues = readQueues(reader);
  const shutdownGraceMs = readDuration(
    reader,
    'TICKWARDEN_SHUTDOWN_GRACE',
    20_000,
    0,
    ENV_DURATION_MAX_MS.TICKWARDEN_SHUTDOWN_GRACE,
  );
  const stalledIntervalMs = readDuration(
    reader,
    'TICKWARDEN_STALLED_INTERVAL',
    DEFAULT_STALLED_INTERVAL_MS,
    1000,
    ENV_DURATION_MAX_MS.TICKWARDEN_STALLED_INTERVAL,
  );
  const secretsDir = reader.get('TICKWARDEN_SECRETS_DIR') ?? DEFAULT_SECRETS_DIR;
  if (!secretsDir.startsWith('/'))
    reader.fail('TICKWARDEN_SECRETS_DIR', `expected an absolute path, got ${quote(secretsDir)}`);
  const launcherSocket = readSocketPath(reader, false);
  return reader.result(() => ({
    ...common(),
    concurrency,
    queues,
    shutdownGraceMs,
    stalledIntervalMs,
    secretsDir,
    launcherSocket,
  }));
}

/** Reads the launcher's environment, like `parseWorkerEnv`. */
export function parseLauncherEnv(env: Env): EnvResult<LauncherEnv> {
  const reader = new EnvReader(env);
  const socketPath = readSocketPath(reader, true);
  const logLevel = readLogLevel(reader);
  return reader.result(() => ({ socketPath: socketPath ?? '', logLevel }));
}

/** A unix socket path: absolute, within the 107 bytes `sun_path` holds. */
function readSocketPath(reader: EnvReader, required: boolean): string | undefined {
  const socketPath = required
    ? reader.required(LAUNCHER_SOCKET_VARIABLE, "the path of the launcher's unix socket")
    : reader.get(LAUNCHER_SOCKET_VARIABLE);
  if (socketPath !== undefined && (!socketPath.startsWith('/') || Buffer.byteLength(socketPath) > 107))
    reader.fail(LAUNCHER_SOCKET_VARIABLE, `expected an absolute path of at most 107 bytes, got ${quote(socketPath)}`);
  return socketPath;
}

function readLogLevel(reader: EnvReader): LogLevel {
  const text = reader.get('LOG_LEVEL') ?? 'info';
  const logLevel = LOG_LEVELS.find((level) => level === text);
  if (logLevel === undefined) reader.fail('LOG_LEVEL', `expected one of ${LOG_LEVELS.join(', ')}, got ${quote(text)}`);
  return logLevel ?? 'info';
}

/**
 * The longest value of each duration variable, ms: past these a setting breaks the model (a
 * contest lead is capped at a third of each lease TTL anyway) or Node's timers (a delay past
 * 2^31-1 ms fires at once).
 */
export const ENV_DURATION_MAX_MS = {
  TICKWARDEN_CONTEST_LEAD: 3_600_000,
  TICKWARDEN_SHUTDOWN_GRACE: 86_400_000,
  TICKWARDEN_STALLED_INTERVAL: 600_000,
} as const;

/** A duration variable, ms: `fallbackMs` when unset; an error (and the fallback) when invalid or outside [`minMs`, `maxMs`]. */
function readDuration(reader: EnvReader, name: string, fallbackMs: number, minMs: number, maxMs: number): number {
  const text = reader.get(name);
  if (text === undefined) return fallbackMs;
  const ms = parseDuration(text);
  if (ms !== undefined && ms >= minMs && ms <= maxMs) return ms;
  const range =
    minMs > 0 ? `from ${formatDuration(minMs)} to ${formatDuration(maxMs)}` : `of at most ${formatDuration(maxMs)}`;
  reader.fail(name, `expected a duration ${range} such as 20s or 1m30s, got ${quote(text)}`);
  return fallbackMs;
}

function readCommon(reader: EnvReader, defaultPort: number): () => CommonEnv {
  const configPath = reader.required('TICKWARDEN_CONFIG', 'the path of a YAML file or of a directory of YAML files');
  const { lockNodes, lockQuorum, lockAllowSingle } = readLock(reader);
  const queueRedisText = reader.required('TICKWARDEN_QUEUE_REDIS', 'a redis:// or rediss:// URL of the BullMQ Redis');
  if (queueRedisText !== undefined) {
    const problem = redisUrlProblem(queueRedisText);
    if (problem !== undefined) reader.fail('TICKWARDEN_QUEUE_REDIS', `${problem}, got ${quote(queueRedisText)}`);
    else {
      const lockEntry = lockNodes.findIndex(
        (entry) => redisUrlProblem(entry) === undefined && serverKey(entry) === serverKey(queueRedisText),
      );
      if (lockEntry !== -1)
        reader.fail(
          'TICKWARDEN_QUEUE_REDIS',
          `is the same Redis server as ${LOCK_NODES} entry ${lockEntry + 1}: the queue Redis must not be a lock node`,
        );
    }
  }
  const httpPort = reader.integer('TICKWARDEN_HTTP_PORT', defaultPort, 0, 65_535, 'a port number from 0 to 65535');
  const logLevel = readLogLevel(reader);
  const destinations = parseHttpDestinations(reader.get(ALLOW_VARIABLE), reader.get(DENY_VARIABLE));
  for (const error of destinations.errors) reader.fail(error.variable, error.message);
  const redisTls = readRedisTls(reader);
  // only called when there is no error, so every value is set
  return () => ({
    configPath: configPath ?? '',
    lockNodes,
    lockQuorum,
    lockAllowSingle,
    queueRedis: queueRedisText ?? '',
    httpPort,
    logLevel,
    httpDestinations: destinations.value,
    redisTls,
  });
}

/** The TLS file variables: a client certificate and its key come together. The files are read at start (see `loadRedisTls` in @tickwarden/runtime). */
function readRedisTls(reader: EnvReader): RedisTlsFiles {
  const files = {
    ca: reader.get(REDIS_TLS_VARIABLES.ca),
    cert: reader.get(REDIS_TLS_VARIABLES.cert),
    key: reader.get(REDIS_TLS_VARIABLES.key),
  };
  if ((files.cert === undefined) !== (files.key === undefined)) {
    const [set, unset] =
      files.cert === undefined
        ? [REDIS_TLS_VARIABLES.key, REDIS_TLS_VARIABLES.cert]
        : [REDIS_TLS_VARIABLES.cert, REDIS_TLS_VARIABLES.key];
    reader.fail(unset, `is required when ${set} is set: a client certificate and its private key come together`);
  }
  return files;
}

const LOCK_NODES = 'TICKWARDEN_LOCK_NODES';
const LOCK_QUORUM = 'TICKWARDEN_LOCK_QUORUM';
const LOCK_ALLOW_SINGLE = 'TICKWARDEN_LOCK_ALLOW_SINGLE';

function readLock(reader: EnvReader): Pick<CommonEnv, 'lockNodes' | 'lockQuorum' | 'lockAllowSingle'> {
  const text = reader.required(
    LOCK_NODES,
    'a comma-separated list of redis:// or rediss:// URLs of independent Redis masters, e.g. redis://lock-0:6379,redis://lock-1:6379,redis://lock-2:6379',
  );
  const lockNodes = text === undefined ? [] : text.split(',').map((entry) => entry.trim());
  let nodesValid = text !== undefined;
  const servers = new Map<string, number>();
  for (const [index, entry] of lockNodes.entries()) {
    const problem = redisUrlProblem(entry);
    if (problem !== undefined) {
      reader.fail(LOCK_NODES, `entry ${index + 1} ${entry === '' ? 'is empty' : `(${quote(entry)})`}: ${problem}`);
      nodesValid = false;
      continue;
    }
    const server = serverKey(entry);
    const first = servers.get(server);
    if (first !== undefined) {
      reader.fail(
        LOCK_NODES,
        `entries ${first + 1} and ${index + 1} are the same Redis server (${server}): the lock masters must be independent`,
      );
      nodesValid = false;
    } else servers.set(server, index);
  }

  const count = lockNodes.length;
  const allowSingle = reader.get(LOCK_ALLOW_SINGLE) === '1';
  if (nodesValid && count === 1 && !allowSingle) {
    reader.fail(
      LOCK_NODES,
      `one lock node is a single point of failure and no quorum: use 3 or 5 independent Redis masters, or set ${LOCK_ALLOW_SINGLE}=1 to run on one anyway (development only)`,
    );
  }
  const quorumText = reader.get(LOCK_QUORUM);
  let lockQuorum: number | undefined;
  if (quorumText !== undefined) {
    const quorum = /^\d+$/.test(quorumText) ? Number(quorumText) : undefined;
    if (quorum === undefined) reader.fail(LOCK_QUORUM, `expected an integer, got ${quote(quorumText)}`);
    else if (nodesValid && (quorum <= count / 2 || quorum > count)) {
      reader.fail(
        LOCK_QUORUM,
        `expected an integer greater than half the ${count} lock nodes and at most ${count} (${Math.floor(count / 2) + 1} to ${count}), got ${quorum}`,
      );
    } else lockQuorum = quorum;
  } else if (nodesValid && count % 2 === 0) {
    const majority = count / 2 + 1;
    reader.fail(
      LOCK_NODES,
      `${count} lock nodes is an even count: a majority is ${majority}, so it survives ${count - majority} failed node${count - majority === 1 ? '' : 's'}, no more than ${count - 1} nodes would; use an odd count, or set ${LOCK_QUORUM} explicitly (${majority} to ${count})`,
    );
  }
  return { lockNodes, lockQuorum, lockAllowSingle: allowSingle };
}

/** Loopback host names and addresses, all one host: `localhost`, `127.x.y.z` and its short forms (`127.1`: a redis: URL keeps them as written), `::1`. */
const LOOPBACK_HOST = /^(localhost|127(\.\d{1,3}){0,3}|\[::1\]|\[::ffff:7f[0-9a-f]{2}:[0-9a-f]{1,4}\])$/;

/** The server a Redis URL names, for telling two entries apart by their text (the run_id check at start catches the rest). */
function serverKey(text: string): string {
  const url = new URL(text);
  const host = url.hostname.toLowerCase();
  return `${LOOPBACK_HOST.test(host) ? 'loopback' : host}:${url.port === '' ? '6379' : url.port}`;
}

function readQueues(reader: EnvReader): string[] | undefined {
  const text = reader.get('TICKWARDEN_QUEUES');
  if (text === undefined) return undefined;
  const queues: string[] = [];
  for (const [index, entry] of text
    .split(',')
    .map((item) => item.trim())
    .entries()) {
    if (!QUEUE_PATTERN.test(entry)) {
      const what = entry === '' ? 'is empty' : `is ${quote(entry)}`;
      reader.fail(
        'TICKWARDEN_QUEUES',
        `entry ${index + 1} ${what}: expected queue names of 1-63 lower-case letters, digits and "-", starting with a letter or digit`,
      );
    } else if (!queues.includes(entry)) queues.push(entry);
  }
  return queues;
}

/** Why `text` is not a usable Redis URL (without echoing it), or `undefined`. */
function redisUrlProblem(text: string): string | undefined {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return /^rediss?:\/\//.test(text)
      ? 'not a valid URL (percent-encode any / ? # or @ in the user name and password)'
      : 'expected a redis:// or rediss:// URL such as redis://host:6379 or rediss://host:6380/0';
  }
  if (url.protocol !== 'redis:' && url.protocol !== 'rediss:')
    return 'expected a redis:// or rediss:// URL such as redis://host:6379 or rediss://host:6380/0';
  if (url.hostname === '') return 'expected a host name after the scheme';
  if (!/^(\/\d*)?$/.test(url.pathname)) return 'expected nothing or a database number (/0) after the host and port';
  return undefined;
}

/** A value echoed in a message: quoted, any URL password masked. */
const quote = (value: string): string => JSON.stringify(redactUrl(value));

class EnvReader {
  readonly #env: Env;
  readonly #errors: EnvError[] = [];

  constructor(env: Env) {
    this.#env = env;
  }

  /** The trimmed value, `undefined` when unset, empty or blank. */
  get(variable: string): string | undefined {
    const value = this.#env[variable]?.trim();
    return value === undefined || value === '' ? undefined : value;
  }

  required(variable: string, what: string): string | undefined {
    const value = this.get(variable);
    if (value === undefined) this.fail(variable, `is required: ${what}`);
    return value;
  }

  integer(variable: string, fallback: number, min: number, max: number, what: string): number {
    const text = this.get(variable);
    if (text === undefined) return fallback;
    const value = /^\d+$/.test(text) ? Number(text) : Number.NaN;
    if (!(value >= min && value <= max)) {
      this.fail(variable, `expected ${what}, got ${quote(text)}`);
      return fallback;
    }
    return value;
  }

  fail(variable: string, message: string): void {
    this.#errors.push({ variable, message });
  }

  result<T>(value: () => T): EnvResult<T> {
    return this.#errors.length > 0 ? { ok: false, errors: [...this.#errors] } : { ok: true, value: value() };
  }
}
