import { ContainerRedisNode } from './container-redis-node.ts';
import { FaultProxy, type Fault } from './fault-proxy.ts';
import { LOOPBACK } from './free-port.ts';
import { ProcessRedisNode } from './process-redis-node.ts';
import type { RedisDriver, RedisNode, RedisNodeOptions } from './redis-node.ts';

/** Options of {@link startRedisNodes}. */
export interface StartRedisNodesOptions extends Partial<RedisNodeOptions> {
  /** How many independent nodes. Default 1. */
  count?: number;
  /** `process` (redis-server on PATH) or `container` (Testcontainers). Default `TICKWARDEN_TEST_REDIS_DRIVER` or `process`. */
  driver?: RedisDriver;
}

/**
 * One client's view of the nodes through its own fault proxies: faults set
 * here affect this client only, so "client X cannot reach nodes {a,b}" while
 * every other client still can.
 */
export class ClientLink {
  readonly clientId: string;
  readonly #nodes: readonly RedisNode[];
  readonly #proxies: readonly FaultProxy[];
  readonly #password: string | undefined;
  readonly #scheme: 'redis' | 'rediss';

  constructor(
    clientId: string,
    nodes: readonly RedisNode[],
    proxies: readonly FaultProxy[],
    password: string | undefined,
    scheme: 'redis' | 'rediss' = 'redis',
  ) {
    this.clientId = clientId;
    this.#nodes = nodes;
    this.#proxies = proxies;
    this.#password = password;
    this.#scheme = scheme;
  }

  /** Proxy ports, in node order. */
  get ports(): number[] {
    return this.#proxies.map((proxy) => proxy.port);
  }

  /** `redis://` URLs through this client's proxies, in node order (`rediss://` to nodes started with certificates). */
  get urls(): string[] {
    const auth = this.#password ? `:${encodeURIComponent(this.#password)}@` : '';
    return this.ports.map((port) => `${this.#scheme}://${auth}${LOOPBACK}:${port}`);
  }

  /** Sets the fault between this client and one node (by index or node id). */
  setFault(node: number | string, fault: Fault): void {
    this.#proxy(node).setFault(fault);
  }

  /** This client can no longer reach `nodes`: its traffic to them is blackholed until {@link heal}. */
  partition(nodes: Iterable<number | string>): void {
    for (const node of nodes) this.setFault(node, { kind: 'blackhole' });
  }

  /** Removes every fault of this client. */
  heal(): void {
    for (const proxy of this.#proxies) proxy.setFault({ kind: 'none' });
  }

  #proxy(node: number | string): FaultProxy {
    const index = typeof node === 'number' ? node : this.#nodes.findIndex((n) => n.id === node);
    const proxy = this.#proxies[index];
    if (!proxy) throw new Error(`client ${this.clientId}: no node ${String(node)}`);
    return proxy;
  }

  close(): Promise<unknown> {
    return Promise.all(this.#proxies.map((proxy) => proxy.close()));
  }
}

/** A set of independent Redis nodes started by the kit, and the client links in front of them. */
export class RedisNodes {
  readonly nodes: readonly RedisNode[];
  readonly #links = new Map<string, Promise<ClientLink>>();
  readonly #password: string | undefined;
  /** Started with certificates: clients (direct URLs and links) use the TLS ports. */
  readonly #tlsClients: boolean;

  constructor(nodes: readonly RedisNode[], password: string | undefined, tlsClients = false) {
    this.nodes = nodes;
    this.#password = password;
    this.#tlsClients = tlsClients;
  }

  /** Direct URLs (no proxy), in node order: `rediss://` to the TLS ports of nodes started with certificates. */
  get urls(): string[] {
    return this.nodes.map((node) => (this.#tlsClients ? (node.tls?.url ?? node.url) : node.url));
  }

  node(index: number): RedisNode {
    const node = this.nodes[index];
    if (!node) throw new Error(`no node ${index} (have ${this.nodes.length})`);
    return node;
  }

  /** The link of `clientId`, with one fault proxy per node; created on first use. */
  link(clientId: string): Promise<ClientLink> {
    let link = this.#links.get(clientId);
    if (!link) {
      const upstream = (node: RedisNode): number =>
        this.#tlsClients && node.tls ? Number(new URL(node.tls.url).port) : node.port;
      link = Promise.all(this.nodes.map((node) => FaultProxy.start(upstream(node)))).then(
        (proxies) =>
          new ClientLink(clientId, this.nodes, proxies, this.#password, this.#tlsClients ? 'rediss' : 'redis'),
      );
      this.#links.set(clientId, link);
    }
    return link;
  }

  /** Stops every node and proxy. Safe to call twice. */
  async close(): Promise<void> {
    const links = await Promise.all(this.#links.values());
    this.#links.clear();
    await Promise.all([...links.map((link) => link.close()), ...this.nodes.map((node) => node.stop())]);
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }
}

export function defaultDriver(): RedisDriver {
  const driver = process.env['TICKWARDEN_TEST_REDIS_DRIVER'] ?? 'process';
  if (driver !== 'process' && driver !== 'container') {
    throw new Error(`TICKWARDEN_TEST_REDIS_DRIVER must be "process" or "container", got "${driver}"`);
  }
  return driver;
}

/** Starts `count` independent Redis nodes on free loopback ports. Call `close()` when done (the reaper covers crashes). */
export async function startRedisNodes(options: StartRedisNodesOptions = {}): Promise<RedisNodes> {
  const { count = 1, driver = defaultDriver(), aof = true, password, tls = false, extraArgs = [] } = options;
  const nodeOptions: RedisNodeOptions = { aof, password, tls, extraArgs };
  const start = driver === 'container' ? ContainerRedisNode.start : ProcessRedisNode.start;
  const results = await Promise.allSettled(Array.from({ length: count }, () => start(nodeOptions)));
  const nodes = results.flatMap((result) => (result.status === 'fulfilled' ? [result.value] : []));
  const failure = results.find((result) => result.status === 'rejected');
  if (failure) {
    await Promise.all(nodes.map((node) => node.stop()));
    throw failure.reason;
  }
  return new RedisNodes(nodes, password, typeof tls === 'object');
}
