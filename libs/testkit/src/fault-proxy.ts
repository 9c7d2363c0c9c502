import net from 'node:net';
import { LOOPBACK } from './free-port.ts';

/**
 * What a fault proxy does to the traffic of one client towards one node.
 * - `none`: bytes pass as they come.
 * - `latency`: every chunk, in both directions, is delivered `ms` later (order kept, also
 *   across a change of fault: nothing overtakes a chunk still delayed).
 * - `blackhole`: connections are accepted but nothing is delivered either way; the
 *   bytes wait (as TCP would retransmit them) and flow again once healed, so a
 *   command sent into a partition can still land late - as on a real network.
 * - `reset`: open connections are reset (RST) and new ones are reset on accept.
 */
export type Fault = { kind: 'none' } | { kind: 'latency'; ms: number } | { kind: 'blackhole' } | { kind: 'reset' };

/** One accepted connection and its upstream twin. */
class Pipe {
  readonly #client: net.Socket;
  readonly #upstream: net.Socket;
  #fault: Fault;
  /**
   * Per direction: delayed chunks waiting for their delivery time, in arrival order. A chunk
   * arriving while any wait (latency just healed, say) queues behind them: TCP never reorders
   * a stream, and neither may the proxy (a client matches replies to commands by order).
   */
  readonly #queues = new Map<net.Socket, { due: number; chunk: Buffer }[]>();
  readonly #held: { to: net.Socket; chunk: Buffer }[] = [];

  constructor(client: net.Socket, upstreamPort: number, fault: Fault, onClose: () => void) {
    this.#client = client;
    this.#fault = fault;
    this.#upstream = net.connect({ host: LOOPBACK, port: upstreamPort });
    this.#forward(client, this.#upstream);
    this.#forward(this.#upstream, client);
    let closed = false;
    const close = (): void => {
      if (closed) return;
      closed = true;
      this.destroy();
      onClose();
    };
    for (const socket of [client, this.#upstream]) {
      socket.on('error', close);
      socket.on('close', close);
    }
  }

  #forward(from: net.Socket, to: net.Socket): void {
    from.on('data', (chunk: Buffer) => {
      if (this.#fault.kind === 'blackhole') this.#held.push({ to, chunk });
      else this.#send(to, chunk);
    });
  }

  /** Delivers `chunk` after the current latency, and never before a chunk that arrived earlier. */
  #send(to: net.Socket, chunk: Buffer): void {
    const delayMs = this.#fault.kind === 'latency' ? this.#fault.ms : 0;
    let queue = this.#queues.get(to);
    if (!queue) this.#queues.set(to, (queue = []));
    if (queue.length === 0 && delayMs === 0) {
      to.write(chunk);
      return;
    }
    const due = Math.max(performance.now() + delayMs, queue.at(-1)?.due ?? 0);
    queue.push({ due, chunk });
    if (queue.length === 1) this.#drainAt(to, queue);
  }

  /** Writes the queue's head when it is due, then every chunk due by then, and waits for the next. */
  #drainAt(to: net.Socket, queue: { due: number; chunk: Buffer }[]): void {
    const head = queue[0];
    if (!head) return;
    setTimeout(
      () => {
        do {
          const next = queue.shift();
          if (next && !to.destroyed) to.write(next.chunk);
        } while (queue.length > 0 && (queue[0]?.due ?? Infinity) <= performance.now());
        this.#drainAt(to, queue);
      },
      Math.max(0, head.due - performance.now()),
    );
  }

  apply(fault: Fault): void {
    this.#fault = fault;
    if (fault.kind === 'reset') {
      this.#client.resetAndDestroy();
      this.#upstream.resetAndDestroy();
      return;
    }
    if (fault.kind === 'blackhole') return;
    for (const { to, chunk } of this.#held.splice(0)) this.#send(to, chunk);
  }

  destroy(): void {
    this.#client.destroy();
    this.#upstream.destroy();
  }
}

/** A TCP proxy on a free loopback port in front of one upstream port, with a settable fault. */
export class FaultProxy {
  readonly #server: net.Server;
  readonly #pipes = new Set<Pipe>();
  #fault: Fault = { kind: 'none' };
  readonly #upstreamPort: number;

  private constructor(upstreamPort: number) {
    this.#upstreamPort = upstreamPort;
    this.#server = net.createServer((socket) => this.#accept(socket));
  }

  static async start(upstreamPort: number): Promise<FaultProxy> {
    const proxy = new FaultProxy(upstreamPort);
    await new Promise<void>((resolve, reject) => {
      proxy.#server.once('error', reject);
      proxy.#server.listen(0, LOOPBACK, resolve);
    });
    return proxy;
  }

  get port(): number {
    const address = this.#server.address();
    if (!address || typeof address === 'string') throw new Error('fault proxy is not listening');
    return address.port;
  }

  get fault(): Fault {
    return this.#fault;
  }

  #accept(socket: net.Socket): void {
    if (this.#fault.kind === 'reset') {
      socket.on('error', () => undefined);
      socket.resetAndDestroy();
      return;
    }
    const pipe = new Pipe(socket, this.#upstreamPort, this.#fault, () => this.#pipes.delete(pipe));
    this.#pipes.add(pipe);
  }

  /** Applies `fault` to open connections and to those accepted from now on. */
  setFault(fault: Fault): void {
    this.#fault = fault;
    for (const pipe of this.#pipes) pipe.apply(fault);
    if (fault.kind === 'reset') this.#pipes.clear();
  }

  async close(): Promise<void> {
    for (const pipe of this.#pipes) pipe.destroy();
    this.#pipes.clear();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }
}
