import type { Cluster } from './cluster.ts';

/**
 * How often the tick history is read (`tickwarden status --json`), and how many records per
 * schedule: a per-second schedule's history keeps about its start deadline plus a minute.
 */
const HISTORY_POLL_MS = 15_000;
const HISTORY_COUNT = 1000;

/**
 * The cluster's tick history, read every HISTORY_POLL_MS while the faults run (a record is kept
 * about a minute past its tick) and once more for each report: the report takes from it the
 * outcomes whose log line was lost with their recorder.
 */
export class HistoryCollector {
  readonly #cluster: Cluster;
  readonly #records = new Map<string, Record<string, unknown>>();
  readonly #timer: NodeJS.Timeout;
  /** Reads that succeeded, and that failed (each failure is printed). */
  readonly reads = { ok: 0, failed: 0 };

  constructor(cluster: Cluster) {
    this.#cluster = cluster;
    this.#timer = setInterval(() => void this.read(), HISTORY_POLL_MS);
  }

  async read(): Promise<void> {
    try {
      for (const record of await this.#cluster.history(HISTORY_COUNT)) this.#records.set(`${String(record['schedule'])} ${String(record['tickMs'])} ${String(record['outcome'])}`, record);
      this.reads.ok++;
    } catch (error) {
      this.reads.failed++;
      console.log(`could not read the tick history: ${(error as Error).message}`);
    }
  }

  records(): Record<string, unknown>[] {
    return [...this.#records.values()];
  }

  stop(): void {
    clearInterval(this.#timer);
  }
}
