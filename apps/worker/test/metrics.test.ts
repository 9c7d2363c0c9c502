import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadConfig } from '@tickwarden/config';
import { configHash } from '@tickwarden/runtime';
import { startAppProcess, waitUntil } from '@tickwarden/testkit';
import { describe, expect, it } from 'vitest';
import { WorkerMetrics } from '../src/index.ts';
import { useCluster } from './harness.ts';
import { enqueueTick, nodeCommand, shortLeaseSchedule, settledJob } from './support.ts';

/** The value of one series in a Prometheus text exposition, or undefined. */
function sample(text: string, series: string): number | undefined {
  const line = text.split('\n').find((candidate) => candidate.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

const MAIN = fileURLToPath(new URL('../src/main.ts', import.meta.url));

describe('WorkerMetrics per schedule', () => {
  it('counts attempts by team, schedule and outcome; times the ones whose handler ran; keeps the last success; drops schedules no longer configured', async () => {
    const metrics = new WorkerMetrics();
    metrics.recordRun('succeeded', 1500, 'payments/nightly', 1_700_000_000_000);
    metrics.recordRun('failed', 30_000, 'payments/nightly', 1_700_000_100_000);
    metrics.recordRun('deferred', 3, 'payments/nightly', 1_700_000_200_000);
    metrics.recordRun('aborted-timeout', 700_000, 'reporting/hourly');
    // invalid job data: no schedule to label
    metrics.recordRun('failed', 1, undefined);
    let text = await metrics.registry.metrics();
    const nightly = 'team="payments",schedule="payments/nightly"';
    expect(sample(text, `tickwarden_schedule_runs_total{${nightly},outcome="succeeded"}`)).toBe(1);
    expect(sample(text, `tickwarden_schedule_runs_total{${nightly},outcome="failed"}`)).toBe(1);
    expect(sample(text, `tickwarden_schedule_runs_total{${nightly},outcome="deferred"}`)).toBe(1);
    // a deferral ran no handler: not timed
    expect(sample(text, `tickwarden_schedule_run_duration_seconds_count{${nightly}}`)).toBe(2);
    expect(sample(text, `tickwarden_schedule_run_duration_seconds_bucket{le="10",${nightly}}`)).toBe(1);
    expect(sample(text, `tickwarden_schedule_run_duration_seconds_bucket{le="60",${nightly}}`)).toBe(2);
    expect(sample(text, `tickwarden_schedule_run_duration_seconds_sum{${nightly}}`)).toBe(31.5);
    // the success's time, not the later failure's
    expect(sample(text, `tickwarden_schedule_last_success_timestamp_seconds{${nightly}}`)).toBe(1_700_000_000);
    expect(text).not.toMatch(/tickwarden_schedule_last_success_timestamp_seconds\{team="reporting"/);
    expect(
      sample(
        text,
        'tickwarden_schedule_run_duration_seconds_bucket{le="3600",team="reporting",schedule="reporting/hourly"}',
      ),
    ).toBe(1);
    // the totals count every attempt, as before
    expect(sample(text, 'tickwarden_worker_runs_total{outcome="failed"}')).toBe(2);

    metrics.retainSchedules(['reporting/hourly']);
    text = await metrics.registry.metrics();
    expect(text).not.toContain('payments/nightly');
    expect(
      sample(
        text,
        'tickwarden_schedule_runs_total{team="reporting",schedule="reporting/hourly",outcome="aborted-timeout"}',
      ),
    ).toBe(1);
  });
});

describe('worker against real Redis', () => {
  const cluster = useCluster();
  const queueUrl = () =>
    `redis://${cluster.connection.options.host ?? '127.0.0.1'}:${cluster.connection.options.port ?? 6379}`;

  it('runs of a succeeding and a failing schedule: outcomes, duration and the last success, labelled with team and schedule', async () => {
    const ok = shortLeaseSchedule('team-m/ok', nodeCommand(''), { queue: 'q-metrics' });
    const failing = shortLeaseSchedule('team-m/failing', nodeCommand('process.exit(3)'), { queue: 'q-metrics' });
    const { metrics } = await cluster.startWorker([ok, failing]);
    const before = Date.now() / 1000;
    const [a, b] = await Promise.all([
      enqueueTick(cluster.scheduler, cluster.connection, ok),
      enqueueTick(cluster.scheduler, cluster.connection, failing),
    ]);
    expect(await (await settledJob(cluster.connection, 'q-metrics', a.jobId)).getState()).toBe('completed');
    expect(await (await settledJob(cluster.connection, 'q-metrics', b.jobId)).getState()).toBe('failed');
    const text = await metrics.registry.metrics();
    const okLabels = 'team="team-m",schedule="team-m/ok"';
    const failingLabels = 'team="team-m",schedule="team-m/failing"';
    expect(sample(text, `tickwarden_schedule_runs_total{${okLabels},outcome="succeeded"}`)).toBe(1);
    expect(sample(text, `tickwarden_schedule_runs_total{${failingLabels},outcome="failed"}`)).toBe(1);
    expect(sample(text, `tickwarden_schedule_run_duration_seconds_count{${okLabels}}`)).toBe(1);
    expect(sample(text, `tickwarden_schedule_run_duration_seconds_count{${failingLabels}}`)).toBe(1);
    const lastSuccess = sample(text, `tickwarden_schedule_last_success_timestamp_seconds{${okLabels}}`) ?? 0;
    expect(lastSuccess).toBeGreaterThanOrEqual(before);
    expect(lastSuccess).toBeLessThanOrEqual(Date.now() / 1000);
    expect(text).not.toContain(`tickwarden_schedule_last_success_timestamp_seconds{${failingLabels}}`);
  });

  it('the worker process logs the port it bound for port 0 and serves there what it runs; a rejected reload shows until a good one', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'tickwarden-worker-metrics-'));
    const configDir = path.join(dir, 'config');
    mkdirSync(configDir);
    const team = (queues: string[]) =>
      JSON.stringify({
        team: 'ops',
        schedules: queues.map((queue) => ({
          name: `on-${queue}`,
          cron: '0 0 1 1 *',
          queue,
          handler: { kind: 'command', argv: ['true'] },
          maxRuntime: '10s',
        })),
      });
    writeFileSync(path.join(configDir, 'ops.yaml'), team(['a']));
    const worker = startAppProcess({
      role: 'worker',
      name: 'metrics-worker',
      main: MAIN,
      configDir,
      lockNodes: cluster.locks.urls,
      queueRedis: queueUrl(),
      httpPort: 0,
      logLevel: 'info',
      env: { TICKWARDEN_WORKER_CONCURRENCY: '4' },
    });
    try {
      await worker.waitForLine((line) => line.includes('"http listening"'), 'start');
      const port = Number(worker.records.find((record) => record['msg'] === 'http listening')?.['port']);
      expect(port).toBeGreaterThan(0);
      const scrape = async () => (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
      const first = await loadConfig(configDir);
      if (!first.ok) throw new Error('invalid test config');
      let text = await scrape();
      expect(text).toMatch(/^tickwarden_build_info\{version="0\.0\.0",node="v\d+\.\d+\.\d+"\} 1$/m);
      expect(sample(text, `tickwarden_config_info{hash="${await configHash(first.config)}"}`)).toBe(1);
      expect(sample(text, 'tickwarden_config_last_reload_successful')).toBe(1);
      expect(sample(text, 'tickwarden_worker_run_slots')).toBe(4);
      // Probed at each scrape with a 100 ms node timeout: a fresh process on a loaded machine may miss it at first.
      await waitUntil(
        async () => sample(await scrape(), 'tickwarden_lock_quorum_reachable') === 1,
        'a scrape to find a lock quorum',
      );

      writeFileSync(path.join(configDir, 'ops.yaml'), 'team: ops\nschedules: [ { name: broken } ]\n');
      await worker.waitForLine((line) => line.includes('config reload rejected'), 'the reload rejected');
      text = await scrape();
      expect(sample(text, 'tickwarden_config_last_reload_successful')).toBe(0);
      expect(sample(text, `tickwarden_config_info{hash="${await configHash(first.config)}"}`)).toBe(1);

      // A second queue: twice the slots.
      writeFileSync(path.join(configDir, 'ops.yaml'), team(['a', 'b']));
      await worker.waitForLine((line) => line.includes('"config reloaded"'), 'the reload applied');
      const second = await loadConfig(configDir);
      if (!second.ok) throw new Error('invalid test config');
      await waitUntil(
        async () => sample(await scrape(), 'tickwarden_worker_run_slots') === 8,
        'the slots of two queues',
      );
      text = await scrape();
      expect(sample(text, 'tickwarden_config_last_reload_successful')).toBe(1);
      expect(sample(text, `tickwarden_config_info{hash="${await configHash(second.config)}"}`)).toBe(1);
      expect((await worker.stop('SIGTERM')).code).toBe(0);
    } finally {
      await worker.stop('SIGKILL');
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
