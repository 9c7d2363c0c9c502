/** What the queue needs of a tick: when it is due. */
interface Queued {
  dueMs: number;
}

export interface ContestQueueOptions<T> {
  /** Most ticks in one batch (all due in the same second). */
  maxBatch: number;
  /** Most batches contested at a time. */
  maxInFlight: number;
  /** Contests one batch; must not reject (the caller logs its own failures). */
  run: (batch: T[]) => Promise<void>;
}

/**
 * Ticks waiting for their contest, soonest due first, contested in batches of one due second at a
 * time: 100,000 ticks due at one boundary go through a few batches at a time, so the leases, jobs
 * and replies in flight stay bounded, and a tick due now does not wait behind ticks contested
 * ahead of their time.
 */
export class ContestQueue<T extends Queued> {
  readonly #options: ContestQueueOptions<T>;
  #waiting: T[] = [];
  #inFlight = 0;

  constructor(options: ContestQueueOptions<T>) {
    this.#options = options;
  }

  /** Ticks not yet handed to `run`. */
  get waiting(): number {
    return this.#waiting.length;
  }

  /** Ticks waiting, plus batches being contested: 0 once every tick added was contested. */
  get size(): number {
    return this.#waiting.length + this.#inFlight;
  }

  add(ticks: readonly T[]): void {
    if (ticks.length === 0) return;
    this.#waiting = mergeByDue(this.#waiting, [...ticks].sort(byDue));
    this.#pump();
  }

  #pump(): void {
    while (this.#inFlight < this.#options.maxInFlight && this.#waiting.length > 0) {
      this.#inFlight++;
      void this.#options.run(this.#take()).finally(() => {
        this.#inFlight--;
        this.#pump();
      });
    }
  }

  #take(): T[] {
    const second = dueSecond(this.#waiting[0] as T);
    let count = 1;
    while (
      count < this.#options.maxBatch &&
      count < this.#waiting.length &&
      dueSecond(this.#waiting[count] as T) === second
    )
      count++;
    return this.#waiting.splice(0, count);
  }
}

const byDue = (a: Queued, b: Queued): number => a.dueMs - b.dueMs;
const dueSecond = (tick: Queued): number => Math.floor(tick.dueMs / 1000);

/** Both lists, sorted by due time; among equal times the waiting ones first. */
function mergeByDue<T extends Queued>(waiting: readonly T[], incoming: readonly T[]): T[] {
  const merged: T[] = [];
  let i = 0;
  let j = 0;
  while (i < waiting.length || j < incoming.length) {
    const next =
      j >= incoming.length || (i < waiting.length && (waiting[i] as T).dueMs <= (incoming[j] as T).dueMs)
        ? waiting[i++]
        : incoming[j++];
    merged.push(next as T);
  }
  return merged;
}
