import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { TickHeap, type PendingTick } from '../src/tick-heap.ts';

const pending = (scheduleId: string, contestAtMs: number): PendingTick => ({
  scheduleId,
  tickMs: contestAtMs,
  dueMs: contestAtMs,
  contestAtMs,
});

describe('TickHeap', () => {
  it('property: pops every tick pushed, soonest contest first, through interleaved pushes, pops and removals', () => {
    const op = fc.oneof(
      fc.record({ push: fc.tuple(fc.constantFrom('a', 'b', 'c', 'd'), fc.integer({ min: 0, max: 50 })) }),
      fc.record({ pop: fc.constant(true) }),
      fc.record({ remove: fc.constantFrom('a', 'b', 'c', 'd') }),
    );
    fc.assert(
      fc.property(fc.array(op, { maxLength: 300 }), (ops) => {
        const heap = new TickHeap();
        let model: PendingTick[] = [];
        for (const step of ops) {
          if ('push' in step) {
            const item = pending(...step.push);
            heap.push(item);
            model.push(item);
          } else if ('pop' in step) {
            const soonest = Math.min(...model.map((item) => item.contestAtMs));
            const popped = heap.pop();
            if (model.length === 0) expect(popped).toBeUndefined();
            else {
              expect(popped?.contestAtMs).toBe(soonest);
              model.splice(model.indexOf(popped as PendingTick), 1);
            }
          } else {
            heap.removeSchedules(new Set([step.remove]));
            model = model.filter((item) => item.scheduleId !== step.remove);
          }
          expect(heap.size).toBe(model.length);
          expect(heap.peek()?.contestAtMs).toBe(
            model.length === 0 ? undefined : Math.min(...model.map((i) => i.contestAtMs)),
          );
        }
      }),
      { seed: 1, numRuns: 300 },
    );
  });
});
