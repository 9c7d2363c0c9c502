/**
 * Node flags each process runs with, after `node` and before its main module (`dist/main.js` in
 * the image and the benchmark's replicas, `src/main.ts` in the local stack and the tests): the
 * container args in deploy/k8s (a policy there checks them), the image's default command, the
 * local stack and the end-to-end cluster (apps/e2e), and the scheduler benchmark all take them
 * from here.
 *
 * Scheduler: a young generation of 4 MB per semi-space and an old generation that grows by a
 * fifth at a time. A replica's live heap is small but its ticks allocate fast: with default flags
 * V8 keeps old-generation garbage up to its large limit, and `--optimize-for-size` (the flag
 * before) kept the heap small by collecting the young generation at 1 MB, which made garbage
 * collection most of a replica's CPU. The figures: apps/scheduler/BENCHMARK.md ("The V8 flags,
 * once more").
 */
export const PROCESS_NODE_FLAGS: Readonly<Record<'scheduler' | 'worker', readonly string[]>> = Object.freeze({
  scheduler: Object.freeze(['--max-semi-space-size=4', '--heap-growing-percent=20']),
  worker: Object.freeze([]),
});
