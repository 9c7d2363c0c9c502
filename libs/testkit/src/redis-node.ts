import type { TestCertificates } from './redis-admin.ts';

/** Which kind of Redis server the kit starts. */
export type RedisDriver = 'process' | 'container';

/** How one test Redis server is configured. */
export interface RedisNodeOptions {
  /** Keep data in an append-only file with `appendfsync always`, so `restart({ keepData: true })` finds it. Default true. */
  aof: boolean;
  /** `requirepass` for the default user; default none. */
  password: string | undefined;
  /**
   * Also listen with TLS on a second port (process driver only); see `tls` on the node. `true`: a
   * CA of the node's own, clients not authenticated; certificates (`makeTestCertificates`): the
   * server certificate they hold, client certificates required. Default false.
   */
  tls: boolean | TestCertificates;
  /** Extra `redis-server` arguments, e.g. `['--maxmemory', '10mb']`. Default none. */
  extraArgs: readonly string[];
}

/** One Redis server started by the kit, always bound to 127.0.0.1. */
export interface RedisNode {
  /** `127.0.0.1:<port>`: how errors and logs name the node. */
  readonly id: string;
  readonly host: string;
  readonly port: number;
  /** `redis://[:password@]127.0.0.1:<port>`: a direct URL, not through a fault proxy. */
  readonly url: string;
  /** With the `tls` option: `rediss://` URL of the TLS port and the CA certificate (PEM) that signed the server's. */
  readonly tls: { url: string; ca: string } | undefined;
  /** SIGKILL (or `docker kill`): no shutdown, no final AOF rewrite. */
  kill(): Promise<void>;
  /** SIGSTOP (or `docker pause`): the socket stays open but nothing is answered. */
  pause(): Promise<void>;
  /** SIGCONT (or `docker unpause`). */
  resume(): Promise<void>;
  /** Starts the node again on the same port, after killing it if it still runs; empty unless `keepData`. */
  restart(options: { keepData: boolean }): Promise<void>;
  /** `INFO [section]` parsed to `field -> value`; rejects when the node does not answer within `timeoutMs`. */
  info(section?: string, timeoutMs?: number): Promise<Record<string, string>>;
  /** Stops the node for good and deletes its data. Idempotent. */
  stop(): Promise<void>;
}
