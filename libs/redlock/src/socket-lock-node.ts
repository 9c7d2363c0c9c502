import net, { type Socket } from 'node:net';
import tls, { type ConnectionOptions } from 'node:tls';
import { Redis } from 'ioredis';
import { reconnectDelayMs, subscriberOf, SUBSCRIBER_OPTIONS, type LockNode, type NodeSubscriber } from './lock-node.ts';
import { RespReader } from './resp-reader.ts';
import { commandText, evalshaText, evalText } from './resp-text.ts';
import type { LuaScript } from './scripts.ts';

/** How long connecting (TCP, TLS and the handshake) may take before the attempt is dropped, as ioredis' default. */
const CONNECT_TIMEOUT_MS = 10_000;

/** A call waiting for its reply; with `retry`, the EVAL to send instead when the node has no such script. */
interface Pending {
  resolve: (reply: unknown) => void;
  reject: (error: Error) => void;
  retry?: () => string;
}

/** A connection's state; `down`: between connection attempts; `closed`: by `close()`. */
type State = 'connecting' | 'ready' | 'down' | 'closed';

/** Options of a {@link SocketLockNode}. */
export interface SocketLockNodeOptions {
  /** TLS options for a `rediss://` URL (a CA, a client certificate); ignored for `redis://`. */
  tls?: ConnectionOptions;
}

/**
 * A node the library connects itself, from a `redis://` or `rediss://` URL (password, ACL user,
 * database and TLS from the URL), on one connection of its own: each call is its EVALSHA's text
 * written to the socket and one reply read back, without a client library's command object,
 * queue and promise chain per call (BENCHMARK.md, "A connection of its own"). Like the
 * {@link LOCK_CLIENT_OPTIONS} of an ioredis node: calls fail at once while disconnected (a down
 * node must vote "error" now, not succeed late) but wait, within their budget, for a connection
 * being made; a lost connection fails the calls in flight and is made again after 20, 40, ... up
 * to 200 ms. Release notifications come on an ioredis subscriber of the same URL.
 */
export class SocketLockNode implements LockNode {
  readonly id: string;
  readonly #url: string;
  readonly #host: string;
  readonly #port: number;
  readonly #handshake: string[];
  readonly #tls: ConnectionOptions | undefined;
  readonly #reader = new RespReader((reply) => this.#reply(reply));
  #pending: Pending[] = [];
  #socket: Socket | undefined;
  #state: State = 'connecting';
  #attempt = 0;
  #wasReady = false;
  #lastError = '';
  #retry: ReturnType<typeof setTimeout> | undefined;
  #connected: { promise: Promise<void>; resolve: () => void } | undefined;

  constructor(url: string, options: SocketLockNodeOptions = {}) {
    const parsed = new URL(url);
    if (parsed.protocol !== 'redis:' && parsed.protocol !== 'rediss:')
      throw new Error(`a lock node URL must be redis:// or rediss://, not ${parsed.protocol}//`);
    this.#url = url;
    this.#host = parsed.hostname.replace(/^\[(.*)\]$/, '$1');
    this.#port = Number(parsed.port || 6379);
    this.id = `${this.#host}:${this.#port}`;
    // TLS names the server it expects (SNI and the certificate check); SNI takes host names only.
    const servername = net.isIP(this.#host) === 0 ? { servername: this.#host } : {};
    this.#tls = parsed.protocol === 'rediss:' ? { ...servername, ...options.tls } : undefined;
    const password = decodeURIComponent(parsed.password);
    const user = decodeURIComponent(parsed.username);
    const db = Number(parsed.pathname.slice(1) || 0);
    this.#handshake = [
      ...(password ? [commandText(user ? ['auth', user, password] : ['auth', password])] : []),
      ...(db > 0 ? [commandText(['select', String(db)])] : []),
    ];
    this.#connect();
  }

  run(script: LuaScript, keys: readonly string[], args: readonly string[], timeoutMs: number): Promise<unknown> {
    if (this.#state === 'ready') return this.#call(script, keys, args);
    return this.#awaitConnection(timeoutMs).then(() => this.#call(script, keys, args));
  }

  openSubscriber(onMessage: (channel: string, message: string) => void): NodeSubscriber {
    const options = this.#tls ? { ...SUBSCRIBER_OPTIONS, tls: this.#tls } : SUBSCRIBER_OPTIONS;
    return subscriberOf(new Redis(this.#url, { ...options, retryStrategy: reconnectDelayMs }), onMessage);
  }

  async close(): Promise<void> {
    this.#state = 'closed';
    clearTimeout(this.#retry);
    this.#connected?.resolve();
    this.#socket?.destroy();
    this.#failPending('closed');
  }

  #call(script: LuaScript, keys: readonly string[], args: readonly string[]): Promise<unknown> {
    // The connection may have been lost between the wait for it and this call.
    if (this.#state !== 'ready') return Promise.reject(new Error(`not connected (${this.#state})`));
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
    (this.#socket as Socket).write(text);
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
    if (this.#state === 'connecting' || (this.#state === 'down' && !this.#wasReady)) {
      this.#connected ??= withResolve();
      let timer: ReturnType<typeof setTimeout> | undefined;
      await Promise.race([
        this.#connected.promise,
        new Promise<void>((resolve) => (timer = setTimeout(resolve, timeoutMs))),
      ]);
      clearTimeout(timer);
      // The state may have changed while waiting (TypeScript narrowed it before the await).
      const state = this.#state as State;
      if (state === 'ready') return;
      if (state !== 'closed') throw new Error(`not connected within ${timeoutMs} ms (${this.#state})`);
    }
    throw new Error(`not connected (${this.#state}${this.#lastError ? `: ${this.#lastError}` : ''})`);
  }

  #connect(): void {
    this.#state = 'connecting';
    const target = { host: this.#host, port: this.#port };
    const socket = this.#tls ? tls.connect({ ...target, ...this.#tls }) : net.connect(target);
    this.#socket = socket;
    socket.setNoDelay(true);
    const timeout = setTimeout(() => socket.destroy(new Error('connect timed out')), CONNECT_TIMEOUT_MS);
    socket.once(this.#tls ? 'secureConnect' : 'connect', () => {
      this.#greet().then(
        () => {
          clearTimeout(timeout);
          if (this.#socket !== socket || this.#state !== 'connecting') return;
          this.#state = 'ready';
          this.#wasReady = true;
          this.#attempt = 0;
          this.#lastError = '';
          this.#connected?.resolve();
          this.#connected = undefined;
        },
        (error: Error) => socket.destroy(error),
      );
    });
    socket.on('data', (chunk: Buffer) => {
      try {
        this.#reader.feed(chunk);
      } catch (error) {
        socket.destroy(error as Error);
      }
    });
    socket.on('error', (error) => (this.#lastError = error.message));
    socket.on('close', () => {
      clearTimeout(timeout);
      if (this.#socket === socket) this.#lost();
    });
  }

  /** Sends the handshake (AUTH, SELECT) and resolves once every part of it succeeded. */
  #greet(): Promise<unknown> {
    return Promise.all(
      this.#handshake.map((text) => new Promise((resolve, reject) => this.#write(text, { resolve, reject }))),
    );
  }

  #lost(): void {
    this.#socket = undefined;
    this.#reader.reset();
    this.#failPending('connection lost');
    if (this.#state === 'closed') return;
    // Calls waiting for a connection keep waiting, within their budget, for the next attempt's.
    this.#state = 'down';
    this.#retry = setTimeout(() => this.#connect(), reconnectDelayMs(++this.#attempt));
  }

  #failPending(why: string): void {
    const pending = this.#pending;
    this.#pending = [];
    const error = new Error(this.#lastError ? `${why} (${this.#lastError})` : why);
    for (const { reject } of pending) reject(error);
  }
}

function withResolve(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((done) => (resolve = done));
  return { promise, resolve };
}
