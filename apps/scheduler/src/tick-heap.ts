/** A tick waiting to be contested. */
export interface PendingTick {
  scheduleId: string;
  tickMs: number;
  /** Tick plus jitter: when its run is due. */
  dueMs: number;
  /** When to contest it: the contest lead before `dueMs`. */
  contestAtMs: number;
}

/** Min-heap of pending ticks by `contestAtMs`: the one timing structure for all schedules. */
export class TickHeap {
  readonly #items: PendingTick[] = [];

  get size(): number {
    return this.#items.length;
  }

  peek(): PendingTick | undefined {
    return this.#items[0];
  }

  push(item: PendingTick): void {
    const items = this.#items;
    items.push(item);
    for (let i = items.length - 1; i > 0;) {
      const parent = (i - 1) >> 1;
      if ((items[parent] as PendingTick).contestAtMs <= item.contestAtMs) break;
      items[i] = items[parent] as PendingTick;
      items[parent] = item;
      i = parent;
    }
  }

  pop(): PendingTick | undefined {
    const items = this.#items;
    const top = items[0];
    const last = items.pop();
    if (items.length === 0 || !last) return top;
    // `last` sinks from the root: the smaller child moves up into the hole until `last` fits (no swaps, which allocate).
    let i = 0;
    for (let left = 1; left < items.length; left = 2 * i + 1) {
      const right = left + 1;
      const child =
        right < items.length && (items[right] as PendingTick).contestAtMs < (items[left] as PendingTick).contestAtMs
          ? right
          : left;
      if ((items[child] as PendingTick).contestAtMs >= last.contestAtMs) break;
      items[i] = items[child] as PendingTick;
      i = child;
    }
    items[i] = last;
    return top;
  }

  /** Removes every pending tick of these schedules (removed or changed): one pass, however many (a reload may change thousands). */
  removeSchedules(scheduleIds: ReadonlySet<string>): void {
    if (scheduleIds.size === 0) return;
    const kept = this.#items.filter((item) => !scheduleIds.has(item.scheduleId));
    this.#items.length = 0;
    for (const item of kept) this.push(item);
  }
}
