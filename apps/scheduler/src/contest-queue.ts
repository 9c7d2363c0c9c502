/** What the queue needs of a tick: when it is due. */
interface Queued {
  dueMs: number;
}

export interface ContestQueueOptions<T> {
  /** Most ticks in one batch (all due in the same second). */
  maxBatch: number;
  /** Most batches of one due second contested at a time. */
  maxInFlight: number;
  /** Contests one batch; must not reject (the caller logs its own failures). */
  run: (batch: T[]) => Promise<void>;
}

/**
 * Ticks waiting for their contest, soonest due first, contested in batches of one due second:
 * at most `maxInFlight` batches of each second at a time, so the 100,000 ticks of one boundary go
 * through a few batches at a time (the leases, jobs and replies in flight stay bounded), while
 * the ticks of other seconds never wait behind them, nor behind contests held up by an outage.
 */
export class ContestQueue<T extends Queued> {
  readonly #options: ContestQueueOptions<T>;
  #waiting: T[] = [];
  /** Batches in flight, by due second. */
  readonly #inFlight = new Map<number, number>();

  constructor(options: ContestQueueOptions<T>) {
    this.#options = options;
  }

  /** Ticks not yet handed to `run`. */
  get waiting(): number {
    return this.#waiting.length;
  }

  /** Ticks waiting, plus batches being contested: 0 once every tick added was contested. */
  get size(): number {
    let batches = 0;
    for (const count of this.#inFlight.values()) batches += count;
    return this.#waiting.length + batches;
  }

  add(ticks: readonly T[]): void {
    if (ticks.length === 0) return;
    this.#waiting = mergeByDue(this.#waiting, [...ticks].sort(byDue));
    this.#pump();
  }

  /** Starts what each due second's lane has room for, the soonest second first. */
  #pump(): void {
    const { maxBatch, maxInFlight } = this.#options;
    const left: T[] = [];
    for (let from = 0; from < this.#waiting.length;) {
      const second = dueSecond(this.#waiting[from] as T);
      let to = from;
      while (to < this.#waiting.length && dueSecond(this.#waiting[to] as T) === second) to++;
      for (; from < to && (this.#inFlight.get(second) ?? 0) < maxInFlight; from = Math.min(to, from + maxBatch))
        this.#start(second, this.#waiting.slice(from, Math.min(to, from + maxBatch)));
      for (; from < to; from++) left.push(this.#waiting[from] as T);
    }
    this.#waiting = left;
  }

  #start(second: number, batch: T[]): void {
    this.#inFlight.set(second, (this.#inFlight.get(second) ?? 0) + 1);
    void this.#options.run(batch).finally(() => {
      const count = (this.#inFlight.get(second) ?? 1) - 1;
      if (count === 0) this.#inFlight.delete(second);
      else this.#inFlight.set(second, count);
      this.#pump();
    });
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
