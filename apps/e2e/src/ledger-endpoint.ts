import { appendFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/** What the endpoint saw, for the report. */
export interface LedgerEndpointStats {
  requests: number;
  /** Runs that wrote `end` and answered 200. */
  completed: number;
  /** Runs that stopped early because the worker closed the connection (an abort, or the worker died). */
  clientGone: number;
  /** Requests without the headers or body a tick's http call carries (answered 400). */
  rejected: number;
}

const BEAT_MS = 50;

/**
 * The chaos suite's http handler target, on loopback in the harness process:
 * `POST /run` with the worker's `X-Tickwarden-Schedule`, `X-Tickwarden-Tick`
 * and `X-Tickwarden-Fence` headers and the schedule's payload
 * (`{ minMs, maxMs }`) as body. It appends the ledger lines the command and
 * module fixtures write (attempt 0: the worker does not send it; the report
 * reads it from the worker's logs by fence), beating every 50 ms while it
 * holds the request open, and answers 200 once the run's time is up. When the
 * worker closes the connection first (its abort), the run stops at once:
 * nothing more is written, no `end`.
 */
export class LedgerEndpoint {
  readonly stats: LedgerEndpointStats = { requests: 0, completed: 0, clientGone: 0, rejected: 0 };
  readonly #server: Server;
  readonly #ledgerFile: string;

  private constructor(ledgerFile: string) {
    this.#ledgerFile = ledgerFile;
    this.#server = createServer((request, response) => this.#handle(request, response));
  }

  static async start(ledgerFile: string): Promise<LedgerEndpoint> {
    const endpoint = new LedgerEndpoint(ledgerFile);
    await new Promise<void>((resolve, reject) => {
      endpoint.#server.once('error', reject);
      endpoint.#server.listen(0, '127.0.0.1', resolve);
    });
    return endpoint;
  }

  get url(): string {
    return `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}/run`;
  }

  #handle(request: IncomingMessage, response: ServerResponse): void {
    this.stats.requests++;
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const schedule = request.headers['x-tickwarden-schedule'];
      const tick = request.headers['x-tickwarden-tick'];
      const fence = Number(request.headers['x-tickwarden-fence']);
      let body: { minMs?: unknown; maxMs?: unknown } = {};
      try {
        body = JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}') as typeof body;
      } catch {
        // rejected below
      }
      const minMs = typeof body.minMs === 'number' ? body.minMs : 100;
      const maxMs = typeof body.maxMs === 'number' ? body.maxMs : 3000;
      if (
        request.method !== 'POST' ||
        typeof schedule !== 'string' ||
        typeof tick !== 'string' ||
        !Number.isSafeInteger(fence) ||
        maxMs < minMs
      ) {
        this.stats.rejected++;
        response
          .writeHead(400)
          .end(
            'expected POST with X-Tickwarden-Schedule, X-Tickwarden-Tick, X-Tickwarden-Fence and a { minMs, maxMs } body\n',
          );
        return;
      }
      this.#run(response, schedule, tick, fence, runLengthMs(schedule, tick, minMs, maxMs));
    });
  }

  #run(response: ServerResponse, schedule: string, tick: string, fence: number, lengthMs: number): void {
    const write = (event: 'start' | 'beat' | 'end'): void =>
      appendFileSync(this.#ledgerFile, `${schedule} ${tick} ${fence} 0 ${event} ${process.pid} ${Date.now()}\n`);
    let gone = false;
    let timer: NodeJS.Timeout | undefined;
    response.once('close', () => {
      if (response.writableFinished) return;
      gone = true;
      clearTimeout(timer);
      this.stats.clientGone++;
    });
    write('start');
    const started = Date.now();
    const beat = (): void => {
      if (gone) return;
      if (Date.now() - started >= lengthMs) {
        write('end');
        this.stats.completed++;
        response.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}\n');
        return;
      }
      write('beat');
      timer = setTimeout(beat, BEAT_MS);
    };
    timer = setTimeout(beat, BEAT_MS);
  }

  async close(): Promise<void> {
    this.#server.closeAllConnections();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }
}

/** The run length the fixtures draw from schedule and tick (fixtures/ledger-module.mjs has the same). */
export function runLengthMs(schedule: string, tick: string, minMs: number, maxMs: number): number {
  let h = 0;
  for (const char of schedule) h = (h * 31 + char.charCodeAt(0)) % 1000003;
  const minute = Number(tick.slice(14, 16));
  const second = Number(tick.slice(17, 19));
  h = (h * 7919 + (minute * 60 + second) * 104729) % 1000003;
  return minMs + (h % (maxMs - minMs + 1));
}
