/**
 * Where a process's garbage comes from: loaded into a replica with `--import`, it samples every
 * allocation (the objects collected since included) from ALLOC_SAMPLE_AFTER_S (15) after start
 * for ALLOC_SAMPLE_FOR_S (15), and writes the profile to ALLOC_SAMPLE_DIR/alloc-<pid>.heapprofile
 * (Chrome DevTools reads it; `alloc-report.ts` prints its top allocation sites). Node's own
 * `--heap-prof` keeps only objects still alive, which says nothing of what the GC had to collect.
 *
 *   BENCH_TW_NODE_FLAGS="--optimize-for-size --import $PWD/apps/scheduler/bench/alloc-sampler.ts" \
 *     ALLOC_SAMPLE_DIR=/tmp/alloc BENCH_SYSTEMS=tickwarden BENCH_WINDOW_S=30 BENCH_SCENARIOS=ab npm run bench:scheduler
 */
import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';

const seconds = (name: string, fallback: number): number => Number(process.env[name] ?? fallback) * 1000;
const dir = process.env['ALLOC_SAMPLE_DIR'] ?? '.';

const session = new Session();
session.connect();
setTimeout(
  async () => {
    await session.post('HeapProfiler.enable');
    await session.post('HeapProfiler.startSampling', {
      samplingInterval: 16_384,
      includeObjectsCollectedByMajorGC: true,
      includeObjectsCollectedByMinorGC: true,
    });
    setTimeout(
      async () => {
        const { profile } = await session.post('HeapProfiler.stopSampling');
        writeFileSync(`${dir}/alloc-${process.pid}.heapprofile`, JSON.stringify(profile));
      },
      seconds('ALLOC_SAMPLE_FOR_S', 15),
    ).unref();
  },
  seconds('ALLOC_SAMPLE_AFTER_S', 15),
).unref();
