/**
 * Node flags each process runs with, after `node` and before its main module (`dist/main.js` in
 * the image and the benchmark's replicas, `src/main.ts` in the local stack and the tests): the
 * container args in deploy/k8s (a policy there checks them), the image's default command, the
 * local stack and the end-to-end cluster (apps/e2e), and the scheduler benchmark all take them
 * from here.
 *
 * Scheduler: `--optimize-for-size`. A replica's live heap is small (about 30-50 MB at 10,000
 * schedules), but each burst of ticks (a 10,000-tick boundary, or 1,000 ticks every second)
 * allocates fast, and with default flags V8 grows the young generation and keeps old-generation
 * garbage until its (large) limit: 320-390 MB RSS per replica in the benchmark. With the flag
 * V8 collects sooner and gives pages back: 160-210 MB per replica at 10,000 schedules and
 * 137-156 MB at 1,000 per-second schedules in the full benchmark runs, for about twice the
 * replica CPU (`npm run bench:scheduler`, apps/scheduler/BENCHMARK.md). The contest lead hides
 * the slower contest from the ticks.
 */
export const PROCESS_NODE_FLAGS: Readonly<Record<'scheduler' | 'worker', readonly string[]>> = Object.freeze({
  scheduler: Object.freeze(['--optimize-for-size']),
  worker: Object.freeze([]),
});
