import type { ConnectionOptions } from 'node:tls';
import type { LockNode, NodeSubscriber } from './lock-node.ts';
import { NodeConnection, nodeAddress, type ConnectionState, type NodeAddress } from './node-connection.ts';
import { evalshaText, evalText } from './resp-text.ts';
import type { LuaScript } from './scripts.ts';
import { SocketSubscriber } from './socket-subscriber.ts';

/** A call waiting for its reply; with `retry`, the EVAL to send instead when the node has no such script. */
interface Pending {
  resolve: (reply: unknown) => void;
  reject: (error: Error) => void;
  retry?: () => string;
}

/** Options of a {@link SocketLockNode}. */
export interface SocketLockNodeOptions {
  /** TLS options for a `rediss://` URL (a CA, a client certificate); ignored for `redis://`. */
  tls?: ConnectionOptions;
}

/**
 * A node the library connects itself, from a `redis://` or `rediss://` URL (password, ACL user,
 * database and TLS from the URL), on one connection of its own (NodeConnection): each call is its
 * EVALSHA's text written to the socket and one reply read back, without a client library's
 * command object, queue and promise chain per call (BENCHMARK.md, "A connection of its own").
 * As ioredis with LOCK_CLIENT_OPTIONS: calls fail at once while a node that was connected is
 * down (it must vote "error" now, not succeed late), and wait within their budget for a
 * connection being made, or a first one; a lost connection fails the calls in flight. Release
 * notifications come on a second connection, a SocketSubscriber, opened at the first wait.
 */
export class SocketLockNode implements LockNode {
  readonly id: string;
  readonly #address: NodeAddress;
  readonly #connection: NodeConnection;
  #pending: Pending[] = [];
  #wasReady = false;
  #connected: { promise: Promise<void>; resolve: () => void } | undefined;

  constructor(url: string, options: SocketLockNodeOptions = {}) {
    this.#address = nodeAddress(url, options);
    this.id = this.#address.id;
    this.#connection = new NodeConnection(this.#address, {
      reply: (reply) => this.#reply(reply),
      ready: () => {
        this.#wasReady = true;
        this.#connected?.resolve();
        this.#connected = undefined;
      },
      lost: (why) => this.#failPending(why ? `connection lost (${why})` : 'connection lost'),
    });
  }

  run(script: LuaScript, keys: readonly string[], args: readonly string[], timeoutMs: number): Promise<unknown> {
    if (this.#connection.state === 'ready') return this.#call(script, keys, args);
    return this.#awaitConnection(timeoutMs).then(() => this.#call(script, keys, args));
  }

  openSubscriber(onMessage: (channel: string, message: string) => void): NodeSubscriber {
    return new SocketSubscriber(this.#address, onMessage);
  }

  async close(): Promise<void> {
    this.#connection.close();
    this.#connected?.resolve();
    this.#failPending('closed');
  }

  #call(script: LuaScript, keys: readonly string[], args: readonly string[]): Promise<unknown> {
    // The connection may have been lost between the wait for it and this call.
    if (this.#connection.state !== 'ready')
      return Promise.reject(new Error(`not connected (${this.#connection.state})`));
    return new Promise((resolve, reject) => {
      // NOSCRIPT: the node restarted or flushed its scripts; the EVAL loads it (see #reply).
      this.#write(evalshaText(script.sha, keys, args), {
        resolve,
        reject,
        retry: () => evalText(script.source, keys, args),
      });
    });
  }

  #write(text: string, pending: Pending): void {
    this.#pending.push(pending);
    this.#connection.write(text);
  }

  #reply(reply: unknown): void {
    const pending = this.#pending.shift();
    if (!pending) throw new Error('a reply no call waits for');
    if (!(reply instanceof Error)) pending.resolve(reply);
    // NOSCRIPT is the protocol's error code, not a message we wrote.
    else if (pending.retry && reply.message.startsWith('NOSCRIPT'))
      this.#write(pending.retry(), { ...pending, retry: undefined });
    else pending.reject(reply);
  }

  /**
   * A call made while a connection is being made, or before the node was ever connected, waits for
   * the connection within the caller's budget; one made while a node that was connected is down
   * (between attempts) fails at once. A command is never sent after that budget: it could only
   * land late.
   */
  async #awaitConnection(timeoutMs: number): Promise<void> {
    const connection = this.#connection;
    if (connection.state === 'connecting' || (connection.state === 'down' && !this.#wasReady)) {
      this.#connected ??= withResolve();
      let timer: ReturnType<typeof setTimeout> | undefined;
      await Promise.race([
        this.#connected.promise,
        new Promise<void>((resolve) => (timer = setTimeout(resolve, timeoutMs))),
      ]);
      clearTimeout(timer);
      // Read again: the state changed while waiting (TypeScript kept it narrowed across the await).
      const state = connection.state as ConnectionState;
      if (state === 'ready') return;
      if (state !== 'closed') throw new Error(`not connected within ${timeoutMs} ms (${this.#why()})`);
    }
    throw new Error(`not connected (${this.#why()})`);
  }

  /** The connection's state, and its last error (a refused connection, a wrong password). */
  #why(): string {
    const { state, lastError } = this.#connection;
    return lastError ? `${state}: ${lastError}` : state;
  }

  #failPending(why: string): void {
    const pending = this.#pending;
    this.#pending = [];
    const error = new Error(why);
    for (const { reject } of pending) reject(error);
  }
}

function withResolve(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((done) => (resolve = done));
  return { promise, resolve };
}
