import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import { PROCESS_NODE_FLAGS } from '@tickwarden/runtime';
import {
  freePort,
  LIBFAKETIME,
  ManagedProcess,
  startAppProcess,
  startRedisNodes,
  skewedClockEnv,
  type ClientLink,
  type RedisDriver,
  type RedisNodes,
  type TestCertificates,
} from '@tickwarden/testkit';

/** The two kinds of Tickwarden process. */
export type AppRole = 'scheduler' | 'worker';

const ENTRY: Record<AppRole, string> = {
  scheduler: fileURLToPath(new URL('../../scheduler/src/main.ts', import.meta.url)),
  worker: fileURLToPath(new URL('../../worker/src/main.ts', import.meta.url)),
};
const CLI = fileURLToPath(new URL('../../scheduler/src/cli.ts', import.meta.url));
const LAUNCHER = fileURLToPath(new URL('../../worker/src/launcher-main.ts', import.meta.url));

export interface ClusterOptions {
  /** The directory of team YAML files every process reads (TICKWARDEN_CONFIG). */
  configDir: string;
  /** Independent lock masters. Default 5. */
  lockNodes?: number;
  /** Redis servers as processes or containers. Default: the test kit's default driver. */
  driver?: RedisDriver | undefined;
  /**
   * Lock nodes keep an AOF (`appendfsync always`), so a restart may keep their data. Default true.
   * The queue Redis always keeps one (as the manifests ship it), so a restart keeps its queues.
   */
  aof?: boolean;
  /** LOG_LEVEL of every process. Default `debug` (the scheduler logs lost races and skips at debug). */
  logLevel?: string;
  /** Extra environment for every process. */
  env?: Record<string, string>;
  /** Extra environment for the processes of one role (after `env`). */
  roleEnv?: Partial<Record<AppRole, Record<string, string>>>;
  /** `requirepass` of the lock nodes and of the queue Redis (the URLs the processes get carry them). Default none. */
  passwords?: { locks?: string; queue?: string };
  /**
   * TLS to every Redis server (process driver): they require client certificates, and every
   * process connects over `rediss://` with TICKWARDEN_REDIS_TLS_* naming these files. Default none.
   */
  tls?: TestCertificates;
}

/** How often the cluster notes which log lines have arrived (each record's `seenMs`). */
const SEEN_POLL_MS = 50;

/** Workers look for jobs lost with a killed worker this often (production default 30 s): the suites wait for such retries. */
const STALLED_INTERVAL = '3s';

export interface StartAppOptions {
  /** Wall-clock offset of this process, ms (libfaketime; the monotonic clock is not shifted). */
  clockOffsetMs?: number;
  /**
   * A libfaketime timestamp file (see `writeClockOffset`) the process's wall clock follows while
   * it runs: rewriting it steps the live process's clock (read again at most every second). The
   * monotonic clock is not shifted. Excludes `clockOffsetMs`.
   */
  clockFile?: string;
}

/** One scheduler replica or worker started by the cluster. */
export interface AppProcess {
  name: string;
  role: AppRole;
  process: ManagedProcess;
  httpPort: number;
  /** Its own path to every lock node, through fault proxies (latency, partitions). */
  link: ClientLink;
  /** Its own path to the queue Redis, through a fault proxy (`TICKWARDEN_QUEUE_REDIS` is the proxy's URL). */
  queueLink: ClientLink;
  clockOffsetMs: number;
  /** The libfaketime timestamp file its wall clock follows, if any. */
  clockFile: string | undefined;
}

/** Per process: when the harness saw each stdout/stderr line (wall ms), and the records parsed so far. */
interface LineLog {
  seenMs: number[];
  parsed: number;
  records: (Record<string, unknown> & { process: string; seenMs: number })[];
}

/**
 * The whole system on loopback: N independent lock nodes and a queue Redis
 * (from the test kit), scheduler replicas and workers as separate OS
 * processes running the apps' real entry points. Every process reaches the
 * lock nodes and the queue Redis through its own fault proxies (`queueUrl`,
 * the direct URL, is for the CLI and the tests); every process ever started
 * is kept (with its log lines) for the checks that follow a run.
 */
export class Cluster {
  readonly locks: RedisNodes;
  readonly queue: RedisNodes;
  /** Every process started, in start order (stopped ones included). */
  readonly started: AppProcess[] = [];
  readonly #options: ClusterOptions;
  readonly #running = new Map<string, AppProcess>();
  readonly #lines = new Map<AppProcess, LineLog>();
  readonly #seenTimer: NodeJS.Timeout;
  /** Each worker slot's launcher (by the worker's name) and the directory of their sockets. */
  readonly #launchers = new Map<string, { process: ManagedProcess; socketPath: string; exited: boolean }>();
  readonly #socketDir = mkdtempSync(path.join(tmpdir(), 'tickwarden-launchers-'));

  private constructor(options: ClusterOptions, locks: RedisNodes, queue: RedisNodes) {
    this.#options = options;
    this.locks = locks;
    this.queue = queue;
    this.#seenTimer = setInterval(() => this.#noteSeen(), SEEN_POLL_MS);
    this.#seenTimer.unref();
  }

  /** Stamps lines that arrived since the last poll with the harness's wall clock. */
  #noteSeen(): void {
    const now = Date.now();
    for (const app of this.started) {
      const log = this.#lines.get(app);
      if (!log) continue;
      for (let i = log.seenMs.length; i < app.process.lines.length; i++) log.seenMs.push(now);
    }
  }

  static async start(options: ClusterOptions): Promise<Cluster> {
    const { lockNodes = 5, driver, aof = true, passwords = {}, tls = false } = options;
    const [locks, queue] = await Promise.all([
      startRedisNodes({ count: lockNodes, driver, aof, password: passwords.locks, tls }),
      startRedisNodes({ count: 1, driver, aof: true, password: passwords.queue, tls }),
    ]);
    return new Cluster(options, locks, queue);
  }

  /** The TICKWARDEN_REDIS_TLS_* variables of the cluster's processes (none without `tls`). */
  get tlsEnv(): Record<string, string> {
    const { tls } = this.#options;
    return tls
      ? {
          TICKWARDEN_REDIS_TLS_CA: tls.ca,
          TICKWARDEN_REDIS_TLS_CERT: tls.client.cert,
          TICKWARDEN_REDIS_TLS_KEY: tls.client.key,
        }
      : {};
  }

  /** The queue Redis's direct URL (no proxy): for the CLI and the tests. Processes get their own proxy's. */
  get queueUrl(): string {
    const [url] = this.queue.urls;
    if (!url) throw new Error('the queue Redis has no URL');
    return url;
  }

  /**
   * The newest `count` tick records of every schedule, as `tickwarden status --json -n COUNT`
   * prints them (the cluster's tick history in the queue Redis), one object each.
   */
  async history(count: number): Promise<Record<string, unknown>[]> {
    // The CLI parses the scheduler's whole environment, lock nodes included, whatever the command.
    const env = {
      ...process.env,
      TICKWARDEN_CONFIG: this.#options.configDir,
      TICKWARDEN_QUEUE_REDIS: this.queueUrl,
      TICKWARDEN_LOCK_NODES: this.locks.urls.join(','),
      ...this.tlsEnv,
    };
    const { stdout } = await promisify(execFile)(
      process.execPath,
      ['--conditions=@tickwarden/source', CLI, 'status', '--json', '-n', String(count)],
      { env, timeout: 30_000, maxBuffer: 256 * 1024 * 1024 },
    );
    return stdout
      .split('\n')
      .filter((line) => line !== '')
      .map((line) => JSON.parse(line) as Record<string, unknown>);
  }

  /** Starts one process and waits until it logged that it started. */
  async startApp(role: AppRole, name: string, options: StartAppOptions = {}): Promise<AppProcess> {
    if (this.#running.has(name)) throw new Error(`${name} is already running`);
    const clockOffsetMs = options.clockOffsetMs ?? 0;
    const { clockFile } = options;
    if (clockFile !== undefined && clockOffsetMs !== 0)
      throw new Error(`${name}: clockFile and clockOffsetMs exclude each other`);
    const [httpPort, link, queueLink] = await Promise.all([freePort(), this.locks.link(name), this.queue.link(name)]);
    const [queueUrl] = queueLink.urls;
    if (queueUrl === undefined) throw new Error('the queue Redis has no URL');
    const env: Record<string, string> = {
      ...this.tlsEnv,
      ...(role === 'scheduler' ? {} : { TICKWARDEN_STALLED_INTERVAL: STALLED_INTERVAL }),
      ...(clockOffsetMs === 0 ? {} : skewedClockEnv(clockOffsetMs)),
      ...(clockFile === undefined ? {} : followedClockEnv(clockFile)),
      ...this.#options.env,
      ...this.#options.roleEnv?.[role],
    };
    if (role === 'worker') env['TICKWARDEN_LAUNCHER_SOCKET'] = await this.#launcherFor(name);
    const process_ = startAppProcess({
      role,
      name,
      main: ENTRY[role],
      nodeFlags: PROCESS_NODE_FLAGS[role],
      configDir: this.#options.configDir,
      lockNodes: link.urls,
      queueRedis: queueUrl,
      httpPort,
      replicaId: role === 'scheduler' ? name : undefined,
      logLevel: this.#options.logLevel ?? 'debug',
      env,
    });
    const app: AppProcess = { name, role, process: process_, httpPort, link, queueLink, clockOffsetMs, clockFile };
    this.started.push(app);
    this.#lines.set(app, { seenMs: [], parsed: 0, records: [] });
    this.#running.set(name, app);
    const { pid } = process_;
    void process_.exited.then(() => {
      if (this.#running.get(name) === app) this.#running.delete(name);
      // libfaketime keeps a shared-memory segment per faked process; a killed one cannot remove it.
      if (pid !== undefined && (clockOffsetMs !== 0 || clockFile !== undefined)) removeFaketimeShm(pid);
    });
    const startedLine = `"msg":"${role} started"`;
    try {
      await process_.waitForLine((line) => line.includes(startedLine), `${role} started`, 30_000);
    } catch (error) {
      throw new Error(`${name} did not start: ${(error as Error).message}\n${process_.lines.slice(-20).join('\n')}`, {
        cause: error,
      });
    }
    return app;
  }

  /**
   * The socket of worker `name`'s launcher, started with its first worker and kept across the
   * worker's restarts, as a pod's launcher container outlives its worker container: the workers
   * start their programs as the manifests have them do.
   */
  async #launcherFor(name: string): Promise<string> {
    const running = this.#launchers.get(name);
    if (running && !running.exited) return running.socketPath;
    const socketPath = path.join(this.#socketDir, `${name}.sock`);
    const launcher = ManagedProcess.start({
      name: `${name}-launcher`,
      command: process.execPath,
      args: ['--conditions=@tickwarden/source', ...PROCESS_NODE_FLAGS.worker, LAUNCHER],
      env: { TICKWARDEN_LAUNCHER_SOCKET: socketPath, LOG_LEVEL: this.#options.logLevel ?? 'debug' },
    });
    const entry = { process: launcher, socketPath, exited: false };
    this.#launchers.set(name, entry);
    void launcher.exited.then(() => (entry.exited = true));
    await launcher.waitForLine((line) => line.includes('"launcher listening"'), 'launcher listening', 30_000);
    return socketPath;
  }

  /** The launchers' log lines (for the run's logs). */
  get launcherLogs(): { name: string; lines: readonly string[] }[] {
    return [...this.#launchers.values()].map(({ process: launcher }) => ({
      name: launcher.name,
      lines: launcher.lines,
    }));
  }

  /** Running processes of a role (or all), in start order. */
  running(role?: AppRole): AppProcess[] {
    return [...this.#running.values()].filter((app) => role === undefined || app.role === role);
  }

  app(name: string): AppProcess {
    const app = this.#running.get(name);
    if (!app) throw new Error(`${name} is not running`);
    return app;
  }

  /** Sends `signal` and waits for the exit (SIGKILL after `graceMs`). */
  async stopApp(
    name: string,
    signal: NodeJS.Signals = 'SIGTERM',
    graceMs = 20_000,
  ): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
    const app = this.app(name);
    this.#running.delete(name);
    return app.process.stop(signal, graceMs);
  }

  /**
   * Every JSON log record of every process ever started, tagged with the process name and
   * `seenMs`: when the harness read the line (its own wall clock, within ~50 ms; the same clock
   * for every process, whatever libfaketime does to theirs).
   */
  records(): (Record<string, unknown> & { process: string; seenMs: number })[] {
    this.#noteSeen();
    return this.started.flatMap((app) => {
      const log = this.#lines.get(app);
      if (!log) return [];
      const { lines } = app.process;
      for (; log.parsed < log.seenMs.length; log.parsed++) {
        const record = parseRecord(lines[log.parsed] ?? '');
        if (record) log.records.push({ ...record, process: app.name, seenMs: log.seenMs[log.parsed] ?? Date.now() });
      }
      return log.records;
    });
  }

  /** Stops every process (SIGKILL: tests have read what they need) and every Redis node. */
  async close(): Promise<void> {
    clearInterval(this.#seenTimer);
    await Promise.all([...this.#running.values()].map((app) => app.process.stop('SIGKILL')));
    this.#running.clear();
    await Promise.all([...this.#launchers.values()].map(({ process: launcher }) => launcher.stop('SIGKILL')));
    rmSync(this.#socketDir, { recursive: true, force: true });
    await Promise.all([this.locks.close(), this.queue.close()]);
  }
}

function parseRecord(line: string): Record<string, unknown> | undefined {
  if (!line.startsWith('{')) return undefined;
  try {
    const value: unknown = JSON.parse(line);
    return value && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/** libfaketime's shared memory and semaphore of the process `pid` (Debian's build names them by pid), if left behind. */
function removeFaketimeShm(pid: number): void {
  for (const file of [`/dev/shm/faketime_shm_${pid}`, `/dev/shm/sem.faketime_sem_${pid}`])
    rmSync(file, { force: true });
}

/** Writes a libfaketime timestamp file: the followers' wall clock is `offsetMs` off the real one from their next clock read. */
export function writeClockOffset(file: string, offsetMs: number): void {
  const seconds = (Math.abs(offsetMs) / 1000).toFixed(3);
  writeFileSync(file, `${offsetMs < 0 ? '-' : '+'}${seconds}\n`);
}

/**
 * Environment that makes libfaketime follow a timestamp file, read again at most every second (a
 * step applies within 1 s): reading it on every clock call costs ~10 us each, which slowed the
 * processes (start-up took seconds) more than any fault did.
 */
function followedClockEnv(file: string): Record<string, string> {
  if (!existsSync(LIBFAKETIME))
    throw new Error(`a stepped clock needs Debian's libfaketime (${LIBFAKETIME}): apt-get install faketime`);
  if (!existsSync(file)) writeClockOffset(file, 0);
  // FAKETIME must stay unset: it would take priority over the file.
  return {
    LD_PRELOAD: LIBFAKETIME,
    FAKETIME_TIMESTAMP_FILE: file,
    FAKETIME_CACHE_DURATION: '1',
    FAKETIME_DONT_FAKE_MONOTONIC: '1',
  };
}
