import type { Cluster } from './cluster.ts';

/**
 * How often the tick history is read (`tickwarden status --json`), and how many records per
 * schedule: a per-second schedule's history keeps about its start deadline plus a minute.
 */
const HISTORY_POLL_MS = 15_000;
const HISTORY_COUNT = 1000;

export interface HistoryCollectorOptions {
  /**
   * Whether the queue Redis was down (killed or paused on purpose) at some time in [fromMs, toMs]:
   * a read that fails then is counted in `reads.queueDown`, not in `reads.failed`.
   */
  queueDownBetween?: (fromMs: number, toMs: number) => boolean;
}

/**
 * The cluster's tick history, read every HISTORY_POLL_MS while the faults run (a record is kept
 * about a minute past its tick) and once more for each report: the report takes from it the
 * outcomes whose log line was lost with their recorder. Records are kept once read: the queue
 * Redis restarted empty loses its history, not what was read of it before.
 */
export class HistoryCollector {
  readonly #cluster: Cluster;
  readonly #options: HistoryCollectorOptions;
  readonly #records = new Map<string, Record<string, unknown>>();
  readonly #timer: NodeJS.Timeout;
  /** Reads that succeeded, that failed (each failure is printed), and that failed while the queue Redis was down on purpose (printed too). */
  readonly reads = { ok: 0, failed: 0, queueDown: 0 };

  constructor(cluster: Cluster, options: HistoryCollectorOptions = {}) {
    this.#cluster = cluster;
    this.#options = options;
    this.#timer = setInterval(() => void this.read(), HISTORY_POLL_MS);
  }

  async read(): Promise<void> {
    const fromMs = Date.now();
    try {
      for (const record of await this.#cluster.history(HISTORY_COUNT))
        this.#records.set(
          `${String(record['schedule'])} ${String(record['tickMs'])} ${String(record['outcome'])}`,
          record,
        );
      this.reads.ok++;
    } catch (error) {
      const queueDown = this.#options.queueDownBetween?.(fromMs, Date.now()) ?? false;
      if (queueDown) this.reads.queueDown++;
      else this.reads.failed++;
      console.log(
        `could not read the tick history${queueDown ? ' (the queue Redis was down)' : ''}: ${(error as Error).message}`,
      );
    }
  }

  records(): Record<string, unknown>[] {
    return [...this.#records.values()];
  }

  stop(): void {
    clearInterval(this.#timer);
  }
}
