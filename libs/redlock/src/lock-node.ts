import { Cluster, Command, Redis, type RedisOptions } from 'ioredis';
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

/**
 * Client options for nodes the library connects itself (from URLs): commands
 * fail at once while disconnected instead of queueing (a down node must vote
 * "error" now, not succeed late). No auto-pipelining: the library already
 * merges calls made together into one script call per node
 * (CallCoalescer), and a second deferral would only add a loop turn of latency.
 */
export const LOCK_CLIENT_OPTIONS: Readonly<RedisOptions> = Object.freeze({
  enableOfflineQueue: false,
  maxRetriesPerRequest: 0,
  enableAutoPipelining: false,
  retryStrategy: (attempt: number) => Math.min(20 * attempt, 200),
});

/** A node backed by an ioredis client: EVALSHA, falling back to EVAL once when the node has no such script. */
export class IoredisLockNode implements LockNode {
  readonly id: string;
  readonly singleSlot: boolean;
  readonly #client: Redis | Cluster;
  readonly #owned: boolean;
  #nextReady: Promise<void> | undefined;

  constructor(client: Redis | Cluster, owned: boolean, id?: string) {
    this.#client = client;
    this.#owned = owned;
    this.singleSlot = client instanceof Cluster;
    // A Cluster has no single address: name it by the first node it knows unless the caller names it.
    this.id =
      id ??
      (client instanceof Cluster
        ? `cluster:${client.nodes('master')[0]?.options.host ?? 'unknown'}`
        : `${client.options.host}:${client.options.port}`);
    // Errors surface per call; an unhandled 'error' event must not crash the process.
    if (owned) client.on('error', () => undefined);
  }

  /** Connects to a `redis://` or `rediss://` URL (password, ACL user and TLS come from the URL). */
  static fromUrl(url: string, options: RedisOptions = {}): IoredisLockNode {
    const parsed = new URL(url);
    const tls = parsed.protocol === 'rediss:' ? { tls: { servername: parsed.hostname, ...options.tls } } : {};
    return new IoredisLockNode(new Redis(url, { ...LOCK_CLIENT_OPTIONS, ...options, ...tls }), true);
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
        : client.sendCommand(encodedEvalsha(script.sha, keys, args));
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

  async close(): Promise<void> {
    if (this.#owned) this.#client.disconnect();
  }
}

/** The EVALSHA just encoded, kept for the other nodes the same call goes to (see encodedEvalsha). */
let lastEvalsha: { sha: string; keys: readonly string[]; args: readonly string[]; text: string } | undefined;

/**
 * An EVALSHA as a command whose text (RESP) is made once per call, not once per node: the same
 * call goes to every node with the same key and argument arrays (CallCoalescer), and ioredis
 * would otherwise build the whole text again for each of them. It stays a string: a socket
 * writes a string's bytes without the Buffer that converting it first would allocate.
 */
function encodedEvalsha(sha: string, keys: readonly string[], args: readonly string[]): Command {
  if (lastEvalsha?.sha !== sha || lastEvalsha.keys !== keys || lastEvalsha.args !== args) {
    lastEvalsha = { sha, keys, args, text: respEvalsha(sha, keys, args, charCount) };
    // Only for the nodes of this call, which are sent to in one go: arrays reused later may have changed.
    queueMicrotask(() => (lastEvalsha = undefined));
  }
  const command = new Command('evalsha', [], { replyEncoding: 'utf8' });
  const { text } = lastEvalsha;
  command.toWritable = () => text;
  return command;
}

const charCount = (part: string): number => part.length;

/**
 * The RESP text of an EVALSHA, each part's length in bytes as `size` counts them. Counted in
 * characters first: right while the whole text is ASCII, which one byte count of the whole tells
 * (one native call, not one per part); else counted again in bytes.
 */
function respEvalsha(
  sha: string,
  keys: readonly string[],
  args: readonly string[],
  size: (part: string) => number,
): string {
  const count = String(keys.length);
  let text = `*${3 + keys.length + args.length}\r\n$7\r\nevalsha\r\n$${sha.length}\r\n${sha}\r\n$${count.length}\r\n${count}\r\n`;
  for (const part of keys) text += `$${size(part)}\r\n${part}\r\n`;
  for (const part of args) text += `$${size(part)}\r\n${part}\r\n`;
  if (size === charCount && Buffer.byteLength(text) !== text.length)
    return respEvalsha(sha, keys, args, Buffer.byteLength);
  return text;
}
