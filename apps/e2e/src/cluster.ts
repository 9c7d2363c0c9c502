import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { PROCESS_NODE_FLAGS } from '@tickwarden/runtime';
import { freePort, ManagedProcess, startRedisNodes, type ClientLink, type RedisDriver, type RedisNodes } from '@tickwarden/testkit';

/** The two kinds of Tickwarden process. */
export type AppRole = 'scheduler' | 'worker';

const ENTRY: Record<AppRole, string> = {
  scheduler: fileURLToPath(new URL('../../scheduler/src/main.ts', import.meta.url)),
  worker: fileURLToPath(new URL('../../worker/src/main.ts', import.meta.url)),
};

/** Debian's libfaketime: shifts the wall clock of one process (not its monotonic clock). */
export const LIBFAKETIME = '/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1';

export interface ClusterOptions {
  /** The directory of team YAML files every process reads (TICKWARDEN_CONFIG). */
  configDir: string;
  /** Independent lock masters. Default 5. */
  lockNodes?: number;
  /** Redis servers as processes or containers. Default: the test kit's default driver. */
  driver?: RedisDriver | undefined;
  /** Lock nodes keep an AOF (`appendfsync always`), so a restart may keep their data. Default true. */
  aof?: boolean;
  /** LOG_LEVEL of every process. Default `debug` (the scheduler logs lost races and skips at debug). */
  logLevel?: string;
  /** Extra environment for every process. */
  env?: Record<string, string>;
}

/** Workers look for jobs lost with a killed worker this often (production default 30 s): the suites wait for such retries. */
const STALLED_INTERVAL = '3s';

export interface StartAppOptions {
  /** Wall-clock offset of this process, ms (libfaketime; the monotonic clock is not shifted). */
  clockOffsetMs?: number;
}

/** One scheduler replica or worker started by the cluster. */
export interface AppProcess {
  name: string;
  role: AppRole;
  process: ManagedProcess;
  httpPort: number;
  /** Its own path to every lock node, through fault proxies (latency, partitions). */
  link: ClientLink;
  clockOffsetMs: number;
}

/**
 * The whole system on loopback: N independent lock nodes and a queue Redis
 * (from the test kit), scheduler replicas and workers as separate OS
 * processes running the apps' real entry points. Every process reaches the
 * lock nodes through its own fault proxies; every process ever started is
 * kept (with its log lines) for the checks that follow a run.
 */
export class Cluster {
  readonly locks: RedisNodes;
  readonly queue: RedisNodes;
  /** Every process started, in start order (stopped ones included). */
  readonly started: AppProcess[] = [];
  readonly #options: ClusterOptions;
  readonly #running = new Map<string, AppProcess>();

  private constructor(options: ClusterOptions, locks: RedisNodes, queue: RedisNodes) {
    this.#options = options;
    this.locks = locks;
    this.queue = queue;
  }

  static async start(options: ClusterOptions): Promise<Cluster> {
    const { lockNodes = 5, driver, aof = true } = options;
    const [locks, queue] = await Promise.all([startRedisNodes({ count: lockNodes, driver, aof }), startRedisNodes({ count: 1, driver, aof: false })]);
    return new Cluster(options, locks, queue);
  }

  get queueUrl(): string {
    const [url] = this.queue.urls;
    if (!url) throw new Error('the queue Redis has no URL');
    return url;
  }

  /** Starts one process and waits until it logged that it started. */
  async startApp(role: AppRole, name: string, options: StartAppOptions = {}): Promise<AppProcess> {
    if (this.#running.has(name)) throw new Error(`${name} is already running`);
    const clockOffsetMs = options.clockOffsetMs ?? 0;
    const [httpPort, link] = await Promise.all([freePort(), this.locks.link(name)]);
    const env: Record<string, string> = {
      TICKWARDEN_CONFIG: this.#options.configDir,
      TICKWARDEN_LOCK_NODES: link.urls.join(','),
      TICKWARDEN_QUEUE_REDIS: this.queueUrl,
      TICKWARDEN_HTTP_PORT: String(httpPort),
      LOG_LEVEL: this.#options.logLevel ?? 'debug',
      ...(role === 'scheduler' ? { TICKWARDEN_REPLICA_ID: name } : { TICKWARDEN_STALLED_INTERVAL: STALLED_INTERVAL }),
      ...(clockOffsetMs === 0 ? {} : skewedClockEnv(clockOffsetMs)),
      ...this.#options.env,
    };
    const process_ = ManagedProcess.start({ name, command: process.execPath, args: ['--conditions=@tickwarden/source', ...PROCESS_NODE_FLAGS[role], ENTRY[role]], env });
    const app: AppProcess = { name, role, process: process_, httpPort, link, clockOffsetMs };
    this.started.push(app);
    this.#running.set(name, app);
    void process_.exited.then(() => {
      if (this.#running.get(name) === app) this.#running.delete(name);
    });
    const startedLine = `"msg":"${role} started"`;
    try {
      await process_.waitForLine((line) => line.includes(startedLine), `${role} started`, 30_000);
    } catch (error) {
      throw new Error(`${name} did not start: ${(error as Error).message}\n${process_.lines.slice(-20).join('\n')}`, { cause: error });
    }
    return app;
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
  async stopApp(name: string, signal: NodeJS.Signals = 'SIGTERM', graceMs = 20_000): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
    const app = this.app(name);
    this.#running.delete(name);
    return app.process.stop(signal, graceMs);
  }

  /** Every JSON log record of every process ever started, tagged with the process name. */
  records(): (Record<string, unknown> & { process: string })[] {
    return this.started.flatMap((app) => app.process.records.map((record) => ({ ...record, process: app.name })));
  }

  /** Stops every process (SIGKILL: tests have read what they need) and every Redis node. */
  async close(): Promise<void> {
    await Promise.all([...this.#running.values()].map((app) => app.process.stop('SIGKILL')));
    this.#running.clear();
    await Promise.all([this.locks.close(), this.queue.close()]);
  }
}

/** Environment that makes libfaketime shift one process's wall clock by `offsetMs`. */
function skewedClockEnv(offsetMs: number): Record<string, string> {
  if (!existsSync(LIBFAKETIME)) throw new Error(`clock skew needs Debian's libfaketime (${LIBFAKETIME}): apt-get install faketime`);
  const seconds = (offsetMs / 1000).toFixed(3);
  return { LD_PRELOAD: LIBFAKETIME, FAKETIME: offsetMs >= 0 ? `+${seconds}` : seconds, FAKETIME_DONT_FAKE_MONOTONIC: '1' };
}
