/**
 * Node flags each process runs with, after `node` and before its main module (`dist/main.js` in
 * the image and the benchmark's replicas, `src/main.ts` in the local stack and the tests): the
 * container args in deploy/k8s (a policy there checks them), the image's default command, the
 * local stack and the end-to-end cluster (apps/e2e), and the scheduler benchmark all take them
 * from here.
 *
 * Scheduler: `--optimize-for-size`. A replica's live heap is small, but bursts of ticks allocate
 * fast, and with default flags V8 keeps old-generation garbage until its large limit; with the
 * flag it collects sooner and gives pages back, for more CPU, which the contest lead hides from
 * the ticks. The RSS and CPU either way: apps/scheduler/BENCHMARK.md ("The contest lead and the
 * V8 flag").
 */
export const PROCESS_NODE_FLAGS: Readonly<Record<'scheduler' | 'worker', readonly string[]>> = Object.freeze({
  scheduler: Object.freeze(['--optimize-for-size']),
  worker: Object.freeze([]),
});
