import { GenericContainer, getContainerRuntimeClient, type StartedTestContainer } from 'testcontainers';
import { freePort, LOOPBACK } from './free-port.ts';
import { reaper } from './reaper.ts';
import { loopbackUrl, readInfo, redisServerArgs } from './redis-admin.ts';
import type { RedisNode, RedisNodeOptions } from './redis-node.ts';
import { ping, waitUntil } from './wait.ts';

/** Image for the container driver; CI sets it to a local image built by `docker import`. */
export function testRedisImage(): string {
  return process.env['TICKWARDEN_TEST_REDIS_IMAGE'] ?? 'redis:7-alpine';
}

/**
 * A Redis container on the host network, bound to 127.0.0.1 (a port-mapped
 * container would publish on every interface). Killed with `docker kill`,
 * paused with `docker pause`; a restart with data starts the same container
 * again, so its AOF in /data survives; a restart without data replaces it.
 */
export class ContainerRedisNode implements RedisNode {
  readonly host = LOOPBACK;
  #container: StartedTestContainer | undefined;
  readonly #port: number;
  readonly #options: RedisNodeOptions;

  private constructor(port: number, options: RedisNodeOptions) {
    this.#port = port;
    this.#options = options;
  }

  readonly tls = undefined;

  static async start(options: RedisNodeOptions): Promise<ContainerRedisNode> {
    if (options.tls) throw new Error('the container driver has no TLS option; use the process driver');
    const node = new ContainerRedisNode(await freePort(), options);
    await node.#create();
    return node;
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

  async #create(): Promise<void> {
    const { aof, password, extraArgs } = this.#options;
    this.#container = await new GenericContainer(testRedisImage())
      .withNetworkMode('host')
      .withCommand(['redis-server', ...redisServerArgs(this.#port, '/data', aof, password, extraArgs)])
      .withStartupTimeout(30_000)
      .start();
    reaper.watchContainer(this.#container.getId());
    await this.#waitReady();
  }

  #waitReady(): Promise<void> {
    return waitUntil(() => ping(this.#port), `redis container on port ${this.#port}`, { timeoutMs: 30_000 });
  }

  async #docker() {
    const client = await getContainerRuntimeClient();
    if (!this.#container) throw new Error(`container ${this.id} was stopped`);
    return client.container.getById(this.#container.getId());
  }

  async kill(): Promise<void> {
    const container = await this.#docker();
    const state = (await container.inspect()).State;
    if (state.Paused) await container.unpause();
    if (state.Running) await container.kill({ signal: 'SIGKILL' });
    await waitUntil(async () => !(await container.inspect()).State.Running, `container ${this.id} to stop`);
  }

  async pause(): Promise<void> {
    const container = await this.#docker();
    if (!(await container.inspect()).State.Paused) await container.pause();
  }

  async resume(): Promise<void> {
    const container = await this.#docker();
    if ((await container.inspect()).State.Paused) await container.unpause();
  }

  async restart({ keepData }: { keepData: boolean }): Promise<void> {
    await this.kill();
    if (keepData) {
      await (await this.#docker()).start();
      await this.#waitReady();
      return;
    }
    await this.#remove();
    await this.#create();
  }

  info(section?: string, timeoutMs = 1000): Promise<Record<string, string>> {
    return readInfo(this.#port, this.#options.password, section, timeoutMs);
  }

  async #remove(): Promise<void> {
    const container = this.#container;
    if (!container) return;
    this.#container = undefined;
    const client = await getContainerRuntimeClient();
    await client.container.getById(container.getId()).remove({ force: true, v: true });
    reaper.forgetContainer(container.getId());
  }

  stop(): Promise<void> {
    return this.#remove();
  }
}

/** True when a container runtime answers; the container driver needs one. */
export async function containerRuntimeAvailable(): Promise<boolean> {
  try {
    await getContainerRuntimeClient();
    return true;
  } catch {
    return false;
  }
}
