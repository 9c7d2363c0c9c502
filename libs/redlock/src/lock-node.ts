import { Cluster, Command, type Redis, type RedisOptions } from 'ioredis';
import { evalshaText } from './resp-text.ts';
import type { LuaScript } from './scripts.ts';

/**
 * The narrow interface the algorithm runs on: one independent Redis master
 * (or one Redis Cluster, which counts as one node). Timeouts are applied by
 * the caller, so an implementation only has to run the script.
 */
export interface LockNode {
  /** How errors and events name the node, `host:port`. */
  readonly id: string;
  /**
   * True for a Redis Cluster: one script call must stay in one hash slot, so
   * calls for different resources are never merged into one (see CallCoalescer).
   */
  readonly singleSlot?: boolean;
  /**
   * Runs `script`; `timeoutMs` is the caller's budget (the caller enforces it; a node may use it
   * to give up waiting for a connection). Calls must reach the node in the order they are made
   * (one connection does this): a release decided before this node answered relies on it to land
   * before the same client's next call there.
   */
  run(script: LuaScript, keys: readonly string[], args: readonly string[], timeoutMs: number): Promise<unknown>;
  /**
   * Opens a connection of its own for release notifications (see ReleaseNotifier), which hands
   * every message to `onMessage`; without one, waiters retry after the retry delay only.
   */
  openSubscriber?(onMessage: (channel: string, message: string) => void): NodeSubscriber | undefined;
  /** Closes what the library opened; clients passed in by the caller are left open. */
  close(): Promise<void>;
}

/** One node's pub/sub connection: channels come and go, the connection stays until closed. */
export interface NodeSubscriber {
  /** Resolves once the node confirmed the subscription. */
  subscribe(channel: string): Promise<unknown>;
  unsubscribe(channel: string): void;
  close(): void;
}

/** The delay before reconnect attempt `attempt` (1, 2, ...) of a lock node's connection, ms: soon, and never over 200. */
export const reconnectDelayMs = (attempt: number): number => Math.min(20 * attempt, 200);

/**
 * ioredis options for a lock node's client passed in by the caller, as the library's own
 * connections behave (SocketLockNode): commands fail at once while disconnected instead of
 * queueing (a down node must vote "error" now, not succeed late). No auto-pipelining: the library
 * already merges calls made together into one script call per node (CallCoalescer), and a second
 * deferral would only add a loop turn of latency.
 */
export const LOCK_CLIENT_OPTIONS: Readonly<RedisOptions> = Object.freeze({
  enableOfflineQueue: false,
  maxRetriesPerRequest: 0,
  enableAutoPipelining: false,
  retryStrategy: reconnectDelayMs,
});

/**
 * A node backed by an ioredis client the caller passes in (a Redis or a Cluster): EVALSHA,
 * falling back to EVAL once when the node has no such script. The caller's client stays theirs.
 */
export class IoredisLockNode implements LockNode {
  readonly id: string;
  readonly singleSlot: boolean;
  readonly #client: Redis | Cluster;
  #nextReady: Promise<void> | undefined;

  constructor(client: Redis | Cluster, id?: string) {
    this.#client = client;
    this.singleSlot = client instanceof Cluster;
    // A Cluster has no single address: name it by the first node it knows unless the caller names it.
    this.id =
      id ??
      (client instanceof Cluster
        ? `cluster:${client.nodes('master')[0]?.options.host ?? 'unknown'}`
        : `${client.options.host}:${client.options.port}`);
  }

  run(script: LuaScript, keys: readonly string[], args: readonly string[], timeoutMs: number): Promise<unknown> {
    // Not async: on the common path (connected) no promise beyond ioredis' own is made.
    if (this.#client.status !== 'ready')
      return this.#awaitFirstConnection(timeoutMs).then(() => this.#evalsha(script, keys, args));
    return this.#evalsha(script, keys, args);
  }

  #evalsha(script: LuaScript, keys: readonly string[], args: readonly string[]): Promise<unknown> {
    const client = this.#client;
    // A Cluster routes by the command's keys, and a key prefix rewrites them: those encode their own.
    const sent =
      client instanceof Cluster || client.options.keyPrefix
        ? client.evalsha(script.sha, keys.length, ...keys, ...args)
        : client.sendCommand(evalshaCommand(script.sha, keys, args));
    return (sent as Promise<unknown>).catch((error: unknown) => {
      // NOSCRIPT is the protocol's error code, not a message we wrote: the node restarted or flushed its scripts.
      if (!(error instanceof Error) || !error.message.startsWith('NOSCRIPT')) throw error;
      return client.eval(script.source, keys.length, ...keys, ...args);
    });
  }

  /**
   * Commands are not queued while disconnected (a down node must vote "error" at
   * once), but a node that was never connected yet gets the caller's budget to
   * connect. A command is never sent after that budget: it could only land late.
   */
  async #awaitFirstConnection(timeoutMs: number): Promise<void> {
    const client = this.#client;
    if (client.status === 'wait') void client.connect().catch(() => undefined);
    if (client.status !== 'connecting' && client.status !== 'connect') return;
    let timer: ReturnType<typeof setTimeout> | undefined;
    await Promise.race([this.#ready(), new Promise<void>((resolve) => (timer = setTimeout(resolve, timeoutMs)))]);
    clearTimeout(timer);
    if ((client.status as string) !== 'ready')
      throw new Error(`not connected within ${timeoutMs} ms (${client.status})`);
  }

  /**
   * Resolves at the client's next 'ready', shared by every call that waits for it: one listener
   * however many calls a process makes before its first connection (one each would pass
   * EventEmitter's limit of 10 and print a leak warning).
   */
  #ready(): Promise<void> {
    this.#nextReady ??= new Promise<void>((resolve) =>
      this.#client.once('ready', () => {
        this.#nextReady = undefined;
        resolve();
      }),
    );
    return this.#nextReady;
  }

  /**
   * A duplicate of the client (same address, credentials and TLS) in subscriber mode; none for a
   * Cluster. It queues commands until connected (a subscription waits for the connection, its
   * caller bounds the wait; none fails for the reconnects in between, which would leave the
   * resubscription after a reconnect an unhandled rejection) and resubscribes after a reconnect;
   * messages published while it was away are lost, which costs a waiter one retry delay.
   */
  openSubscriber(onMessage: (channel: string, message: string) => void): NodeSubscriber | undefined {
    if (this.#client instanceof Cluster) return undefined;
    const client = this.#client.duplicate({
      enableOfflineQueue: true,
      maxRetriesPerRequest: null,
      enableReadyCheck: false,
      autoResubscribe: true,
      lazyConnect: false,
    });
    client.on('error', () => undefined);
    client.on('message', onMessage);
    return {
      subscribe: (channel) => client.subscribe(channel),
      unsubscribe: (channel) => void client.unsubscribe(channel).catch(() => undefined),
      close: () => client.disconnect(),
    };
  }

  /** The client is the caller's: it stays open. */
  close(): Promise<void> {
    return Promise.resolve();
  }
}

/**
 * An EVALSHA as an ioredis command whose text is made once per call, not once per node
 * (evalshaText): ioredis would otherwise build the whole text again for each of them.
 */
function evalshaCommand(sha: string, keys: readonly string[], args: readonly string[]): Command {
  const command = new Command('evalsha', [], { replyEncoding: 'utf8' });
  const text = evalshaText(sha, keys, args);
  command.toWritable = () => text;
  return command;
}
