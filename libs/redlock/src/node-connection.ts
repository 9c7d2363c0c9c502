import net, { type Socket } from 'node:net';
import tls, { type ConnectionOptions } from 'node:tls';
import { reconnectDelayMs } from './lock-node.ts';
import { RespReader } from './resp-reader.ts';
import { commandText } from './resp-text.ts';

/** How long connecting (TCP, TLS and the handshake) may take before the attempt is dropped, as ioredis' default. */
const CONNECT_TIMEOUT_MS = 10_000;

/** A connection's state; `down`: between connection attempts; `closed`: by `close()`. */
export type ConnectionState = 'connecting' | 'ready' | 'down' | 'closed';

/** Where a node is and how to greet it, from its URL. */
export interface NodeAddress {
  /** How errors and events name the node, `host:port`. */
  id: string;
  host: string;
  port: number;
  /** For `rediss://`: TLS options, the server's name among them when it is a host name. */
  tls: ConnectionOptions | undefined;
  /** AUTH (with the ACL user) and SELECT, as RESP text, sent first on every connection. */
  handshake: string[];
}

/**
 * Reads a `redis://` or `rediss://` URL: password, ACL user, database (`/n`) and TLS; `tls` adds
 * options for a `rediss://` URL (a CA, a client certificate).
 */
export function nodeAddress(url: string, options: { tls?: ConnectionOptions } = {}): NodeAddress {
  const parsed = new URL(url);
  if (parsed.protocol !== 'redis:' && parsed.protocol !== 'rediss:')
    throw new Error(`a lock node URL must be redis:// or rediss://, not ${parsed.protocol}//`);
  const host = parsed.hostname.replace(/^\[(.*)\]$/, '$1');
  const port = Number(parsed.port || 6379);
  // TLS names the server it expects (SNI and the certificate check); SNI takes host names only.
  const servername = net.isIP(host) === 0 ? { servername: host } : {};
  const password = decodeURIComponent(parsed.password);
  const user = decodeURIComponent(parsed.username);
  const db = Number(parsed.pathname.slice(1) || 0);
  return {
    id: `${host}:${port}`,
    host,
    port,
    tls: parsed.protocol === 'rediss:' ? { ...servername, ...options.tls } : undefined,
    handshake: [
      ...(password ? [commandText(user ? ['auth', user, password] : ['auth', password])] : []),
      ...(db > 0 ? [commandText(['select', String(db)])] : []),
    ],
  };
}

/** What a connection tells its owner. */
export interface ConnectionEvents {
  /** Each reply after the handshake's, in order. */
  reply(reply: unknown): void;
  /** Connected and greeted: the owner may write. */
  ready(): void;
  /** The connection is gone (`why`: the last error); a new one follows unless closed. */
  lost(why: string): void;
}

/**
 * One connection to a node, made again after 20, 40, ... at most 200 ms when lost, until
 * closed. Each connection first sends the address's handshake; an error reply to it drops the
 * connection (and names the error in the next `lost`). Replies are read by a RespReader.
 */
export class NodeConnection {
  readonly #address: NodeAddress;
  readonly #events: ConnectionEvents;
  readonly #reader: RespReader;
  #socket: Socket | undefined;
  #state: ConnectionState = 'connecting';
  #attempt = 0;
  #lastError = '';
  /** Handshake replies still due on the current connection. */
  #greeting = 0;
  #retry: ReturnType<typeof setTimeout> | undefined;
  /** Drops an attempt that has not connected and greeted within CONNECT_TIMEOUT_MS. */
  #connectTimer: ReturnType<typeof setTimeout> | undefined;

  constructor(address: NodeAddress, events: ConnectionEvents) {
    this.#address = address;
    this.#events = events;
    this.#reader = new RespReader((reply) => this.#reply(reply));
    this.#connect();
  }

  get state(): ConnectionState {
    return this.#state;
  }

  /** The last connection error's message ('' once connected). */
  get lastError(): string {
    return this.#lastError;
  }

  /** Writes `text` (only while `ready`). */
  write(text: string): void {
    (this.#socket as Socket).write(text);
  }

  close(): void {
    this.#state = 'closed';
    clearTimeout(this.#retry);
    clearTimeout(this.#connectTimer);
    this.#socket?.destroy();
  }

  #reply(reply: unknown): void {
    if (this.#greeting === 0) return this.#events.reply(reply);
    if (reply instanceof Error) {
      this.#socket?.destroy(reply);
      return;
    }
    if (--this.#greeting === 0) this.#ready();
  }

  #ready(): void {
    if (this.#state !== 'connecting') return;
    clearTimeout(this.#connectTimer);
    this.#state = 'ready';
    this.#attempt = 0;
    this.#lastError = '';
    this.#events.ready();
  }

  #connect(): void {
    this.#state = 'connecting';
    const { host, port, tls: tlsOptions, handshake } = this.#address;
    const socket = tlsOptions ? tls.connect({ host, port, ...tlsOptions }) : net.connect({ host, port });
    this.#socket = socket;
    socket.setNoDelay(true);
    this.#connectTimer = setTimeout(() => socket.destroy(new Error('connect timed out')), CONNECT_TIMEOUT_MS);
    socket.once(tlsOptions ? 'secureConnect' : 'connect', () => {
      this.#greeting = handshake.length;
      for (const text of handshake) socket.write(text);
      if (handshake.length === 0) this.#ready();
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
      if (this.#socket !== socket) return;
      clearTimeout(this.#connectTimer);
      this.#lost();
    });
  }

  #lost(): void {
    this.#socket = undefined;
    this.#reader.reset();
    if (this.#state !== 'closed') {
      this.#state = 'down';
      this.#retry = setTimeout(() => this.#connect(), reconnectDelayMs(++this.#attempt));
    }
    this.#events.lost(this.#lastError);
  }
}
