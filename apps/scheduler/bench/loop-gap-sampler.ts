/**
 * When a process's event loop was held: loaded with `--import`, a 5 ms timer notes every gap
 * between two of its runs longer than LOOP_GAP_MS (60), and at exit writes them to
 * LOOP_GAP_DIR/gaps-<pid>.json as [start, end] on the monotonic clock in µs (the clock of a
 * `--cpu-prof` profile) and the wall time at the end. `loop-gap-report.ts` says what ran in each.
 * Only the main thread samples (the config load's worker thread imports this too).
 *
 *   BENCH_TW_NODE_FLAGS="--optimize-for-size --import $PWD/apps/scheduler/bench/loop-gap-sampler.ts --cpu-prof \
 *     --cpu-prof-dir=/tmp/prof --cpu-prof-interval 500" LOOP_GAP_DIR=/tmp/gaps \
 *     BENCH_SCENARIOS=c BENCH_SYSTEMS=tickwarden BENCH_BOUNDARIES=1 npm run bench:scheduler
 */
import { writeFileSync } from 'node:fs';
import { isMainThread } from 'node:worker_threads';

if (isMainThread) {
  const longerThan = BigInt(Number(process.env['LOOP_GAP_MS'] ?? 60) * 1_000_000);
  const dir = process.env['LOOP_GAP_DIR'] ?? '.';
  const gaps: [startUs: number, endUs: number, wallMs: number][] = [];
  let last = process.hrtime.bigint();
  setInterval(() => {
    const now = process.hrtime.bigint();
    if (now - last > longerThan) gaps.push([Number(last / 1000n), Number(now / 1000n), Date.now()]);
    last = now;
  }, 5).unref();
  process.on('exit', () => writeFileSync(`${dir}/gaps-${process.pid}.json`, JSON.stringify(gaps)));
}
