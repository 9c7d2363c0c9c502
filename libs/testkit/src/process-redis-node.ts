import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { freePort, LOOPBACK } from './free-port.ts';
import { reaper } from './reaper.ts';
import { loopbackUrl, makeTestCertificates, readInfo, redisServerArgs } from './redis-admin.ts';
import type { RedisNode, RedisNodeOptions } from './redis-node.ts';
import { ping, sleep, waitUntil } from './wait.ts';

const START_ATTEMPTS = 5;
/** Files a restart-empty keeps: the node's TLS material (its data is everything else). */
const TLS_FILE = /\.(crt|key|csr|ext|srl)$/;

/** A `redis-server` child process (the binary on PATH) in its own temporary directory. */
export class ProcessRedisNode implements RedisNode {
  readonly host = LOOPBACK;
  #port = 0;
  #tlsPort = 0;
  #tlsFiles: { ca: string; cert: string; key: string } | undefined;
  #child: ChildProcess | undefined;
  #exited: Promise<void> = Promise.resolve();
  readonly #dir: string;
  readonly #options: RedisNodeOptions;

  private constructor(options: RedisNodeOptions) {
    this.#options = options;
    this.#dir = mkdtempSync(path.join(tmpdir(), 'tickwarden-redis-'));
    reaper.watchDir(this.#dir);
  }

  /** Starts a node on a free loopback port, retrying on another port if the first was taken meanwhile. */
  static async start(options: RedisNodeOptions): Promise<ProcessRedisNode> {
    const node = new ProcessRedisNode(options);
    if (options.tls) {
      const certificates = options.tls === true ? makeTestCertificates(node.#dir) : options.tls;
      node.#tlsFiles = { ca: certificates.ca, ...certificates.server };
    }
    let lastError: unknown;
    for (let attempt = 0; attempt < START_ATTEMPTS; attempt++) {
      node.#port = await freePort();
      if (options.tls) node.#tlsPort = await freePort();
      try {
        await node.#spawn();
        return node;
      } catch (error) {
        lastError = error;
      }
    }
    await node.stop();
    throw lastError;
  }

  get port(): number {
    return this.#port;
  }
  get id(): string {
    return `${LOOPBACK}:${this.#port}`;
  }
  get url(): string {
    return loopbackUrl('redis', this.#port, this.#options.password);
  }
  get tls(): { url: string; ca: string } | undefined {
    if (!this.#tlsFiles) return undefined;
    const url = loopbackUrl('rediss', this.#tlsPort, this.#options.password);
    return { url, ca: readFileSync(this.#tlsFiles.ca, 'utf8') };
  }
  /** PID of the running redis-server, for tests that check it is gone. */
  get pid(): number | undefined {
    return this.#child?.pid;
  }
  /** The node's data directory (removed by `stop()`). */
  get dataDir(): string {
    return this.#dir;
  }

  async #spawn(): Promise<void> {
    const { aof, password, extraArgs } = this.#options;
    const logFile = path.join(this.#dir, 'redis.log');
    const tls = this.#tlsFiles
      ? [
          '--tls-port',
          String(this.#tlsPort),
          '--tls-cert-file',
          this.#tlsFiles.cert,
          '--tls-key-file',
          this.#tlsFiles.key,
          '--tls-ca-cert-file',
          this.#tlsFiles.ca,
          '--tls-auth-clients',
          this.#options.tls === true ? 'no' : 'yes',
        ]
      : [];
    const args = [...redisServerArgs(this.#port, this.#dir, aof, password, extraArgs), ...tls, '--logfile', logFile];
    const child = spawn('redis-server', args, { stdio: 'ignore' });
    this.#child = child;
    let exitCode: number | null | undefined;
    this.#exited = new Promise((resolve) => {
      child.once('exit', (code) => {
        exitCode = code;
        if (child.pid) reaper.forgetProcess(child.pid);
        resolve();
      });
      child.once('error', () => {
        exitCode = -1;
        resolve();
      });
    });
    if (child.pid) reaper.watchProcess(child.pid);
    try {
      await waitUntil(async () => {
        if (exitCode !== undefined)
          throw new Error(`redis-server on port ${this.#port} exited (${exitCode}): ${this.#logTail()}`);
        return ping(this.#port);
      }, `redis-server on port ${this.#port}`);
    } catch (error) {
      await this.#killChild();
      throw error;
    }
  }

  #logTail(): string {
    try {
      return readFileSync(path.join(this.#dir, 'redis.log'), 'utf8').trim().split('\n').slice(-3).join(' | ');
    } catch {
      return 'no log';
    }
  }

  async #killChild(): Promise<void> {
    const child = this.#child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    child.kill('SIGKILL');
    await this.#exited;
  }

  kill(): Promise<void> {
    return this.#killChild();
  }

  async pause(): Promise<void> {
    this.#child?.kill('SIGSTOP');
    // SIGSTOP is asynchronous: wait until the kernel reports the process stopped.
    await waitUntil(() => this.#state() === 'T', 'redis-server to stop', { timeoutMs: 2000, intervalMs: 1 });
  }

  async resume(): Promise<void> {
    this.#child?.kill('SIGCONT');
    await sleep(0);
  }

  #state(): string | undefined {
    try {
      const stat = readFileSync(`/proc/${this.#child?.pid}/stat`, 'utf8');
      return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
    } catch {
      return undefined;
    }
  }

  async restart({ keepData }: { keepData: boolean }): Promise<void> {
    await this.#killChild();
    if (!keepData) {
      for (const entry of readdirSync(this.#dir))
        if (!TLS_FILE.test(entry)) rmSync(path.join(this.#dir, entry), { recursive: true, force: true });
    }
    await this.#spawn();
  }

  info(section?: string, timeoutMs = 1000): Promise<Record<string, string>> {
    return readInfo(this.#port, this.#options.password, section, timeoutMs);
  }

  async stop(): Promise<void> {
    this.#child?.kill('SIGCONT');
    await this.#killChild();
    rmSync(this.#dir, { recursive: true, force: true });
    reaper.forgetDir(this.#dir);
  }
}
