import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  freePort,
  sleep,
  startAppProcess,
  startRedisNodes,
  waitUntil,
  type ManagedProcess,
  runOnBrokenConfig,
  type RedisNodes,
} from '@tickwarden/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_CONTEST_LEAD_MS } from '@tickwarden/config';
import { LATE_TICK_WINDOW_MS } from '../src/index.ts';

const MAIN = fileURLToPath(new URL('../src/main.ts', import.meta.url));

const CONFIG = `team: e2e
schedules:
  - name: alpha
    cron: "* * * * * *"
    handler: { kind: command, argv: ["true"] }
    overlap: allow
    leaseTtl: 2s
  - name: beta
    cron: "* * * * * *"
    handler: { kind: command, argv: ["true"] }
    overlap: allow
    leaseTtl: 2s
`;

describe('scheduler replicas as OS processes', () => {
  let locks: RedisNodes;
  let queue: RedisNodes;
  let dir: string;
  const replicas: ManagedProcess[] = [];

  beforeAll(async () => {
    [locks, queue] = await Promise.all([
      startRedisNodes({ count: 5, aof: false }),
      startRedisNodes({ count: 1, aof: false }),
    ]);
    dir = mkdtempSync(path.join(tmpdir(), 'tickwarden-scheduler-e2e-'));
    writeFileSync(path.join(dir, 'e2e.yaml'), CONFIG);
  });
  afterAll(async () => {
    await Promise.all(replicas.map((replica) => replica.stop('SIGKILL')));
    await Promise.all([locks.close(), queue.close()]);
    rmSync(dir, { recursive: true, force: true });
  });

  const ports = new Map<string, number>();

  async function startReplica(name: string, logLevel = 'info'): Promise<ManagedProcess> {
    const port = await freePort();
    ports.set(name, port);
    const replica = startAppProcess({
      role: 'scheduler',
      name,
      main: MAIN,
      configDir: dir,
      lockNodes: locks.urls,
      queueRedis: queue.urls[0],
      replicaId: name,
      httpPort: port,
      logLevel,
    });
    replicas.push(replica);
    await replica.waitForLine((line) => line.includes('scheduler started'), 'start');
    return replica;
  }

  /** Per schedule and tick, how many replicas logged that their add made its job ("tick enqueued" or "tick recovered"). */
  function enqueued(): Map<string, number> {
    const counts = new Map<string, number>();
    for (const replica of replicas)
      for (const record of replica.records)
        if (
          (record['outcome'] === 'enqueued' || record['outcome'] === 'recovered') &&
          record['found'] !== true &&
          record['level'] === 30
        ) {
          const key = `${String(record['schedule'])} ${String(record['tick'])}`;
          counts.set(key, (counts.get(key) ?? 0) + 1);
        }
    return counts;
  }

  it('SIGKILL of one replica and SIGSTOP of another past the lease TTL: every tick enqueued exactly once; SIGTERM drains', async () => {
    const [r0, r1] = [await startReplica('p0'), await startReplica('p1'), await startReplica('p2')];
    const from = Date.now() + 1000;
    await sleep(3000);
    const base = `http://127.0.0.1:${ports.get('p2')}`;
    expect((await fetch(`${base}/healthz`)).status).toBe(200);
    // Readiness probes the lock nodes with a 100 ms node timeout, and this is p2's first probe: on a
    // loaded machine one probe can miss it (readiness is polled).
    await waitUntil(async () => (await fetch(`${base}/readyz`)).status === 200, 'p2 ready', { intervalMs: 200 });
    // Each replica contests only the ticks it is the preferred contender of (about a third here), so wait for one.
    await waitUntil(
      async () => {
        const text = await (await fetch(`${base}/metrics`)).text();
        return (
          /^tickwarden_scheduler_contenders 3$/m.test(text) &&
          /^tickwarden_ticks_total\{outcome="enqueued"\} [1-9]/m.test(text)
        );
      },
      'p2 to see 3 contenders and enqueue a tick',
      { intervalMs: 200 },
    );
    const killedAt = Date.now();
    r0?.signal('SIGKILL');
    await sleep(2000);
    r1?.signal('SIGSTOP');
    await sleep(3500); // longer than the 2 s lease TTL
    r1?.signal('SIGCONT');
    await sleep(3000);
    const to = Date.now() - 1500;
    const exits = await Promise.all(replicas.slice(1).map((replica) => replica.stop('SIGTERM')));
    expect(exits.map((exit) => exit.code)).toEqual([0, 0]);

    const counts = enqueued();
    // On a failure, every record of the tick from every replica (a flake under CI load left no trace).
    const recordsOf = (schedule: string, tick: string): string =>
      JSON.stringify(
        replicas.flatMap((replica) =>
          replica.records
            .filter((record) => record['schedule'] === schedule && record['tick'] === tick)
            .map((record) => ({ replica: replica.name, ...record })),
        ),
      );
    // The replicas that found the tick's job published name its maker; all of them must agree.
    const foundMakers = (schedule: string, tick: string): string[] => [
      ...new Set(
        replicas.flatMap((replica) =>
          replica.records
            .filter((record) => record['schedule'] === schedule && record['tick'] === tick && record['found'] === true)
            .map((record) => String(record['enqueuedBy'])),
        ),
      ),
    ];
    for (const schedule of ['e2e/alpha', 'e2e/beta']) {
      for (let tick = Math.ceil(from / 1000) * 1000; tick < to; tick += 1000) {
        const iso = new Date(tick).toISOString();
        const key = `${schedule} ${iso}`;
        // p0's add can make the job in the moment before its SIGKILL, which leaves it no time to read
        // the reply and log it: then the tick's record is the one that found the job, made by p0.
        const killedMadeIt =
          tick > killedAt - 3000 &&
          tick <= killedAt &&
          counts.get(key) === undefined &&
          foundMakers(schedule, iso).join() === 'p0';
        if (counts.get(key) !== 1 && !killedMadeIt)
          expect.fail(`${key}: ${counts.get(key) ?? 0} enqueues; records: ${recordsOf(schedule, iso)}`);
      }
    }
    expect([...counts.values()].every((n) => n === 1)).toBe(true);
  });

  it('a replica stopped longer than the late-tick window leaves the ticks it finds too late to recovery: the others decided them, nothing is missed or run twice', async () => {
    const running = await startReplica('q0');
    const stalled = await startReplica('q1', 'debug');
    // Ticks between the previous test's replicas and these are missed (no replica ran): by design, and not this test's.
    const from = Date.now();
    await sleep(2000);
    stalled.signal('SIGSTOP');
    // Its ticks were taken up a contest lead ahead: stalled past that and the late window, it wakes to late ones.
    await sleep(DEFAULT_CONTEST_LEAD_MS + LATE_TICK_WINDOW_MS + 3000);
    stalled.signal('SIGCONT');
    await sleep(2000);
    const exits = await Promise.all([running.stop('SIGTERM'), stalled.stop('SIGTERM')]);
    expect(exits.map((exit) => exit.code)).toEqual([0, 0]);
    const all = [...running.records, ...stalled.records];
    expect(
      all.filter(
        (record) => record['outcome'] === 'missed' && Date.parse(String(record['lastTick'] ?? record['tick'])) >= from,
      ),
    ).toEqual([]);
    // Ticks older than the late window when it woke (about 3 s of them per schedule) are not contested.
    const late = stalled.records.find(
      (record) => record['msg'] === 'ticks too late to contest (this replica was stalled): left to recovery',
    );
    expect(Number(late?.['late'])).toBeGreaterThanOrEqual(4);
    expect(
      stalled.records.filter(
        (record) =>
          record['outcome'] !== undefined && Number(record['lagMs']) > LATE_TICK_WINDOW_MS && record['level'] === 30,
      ),
    ).toEqual([]);
    expect([...enqueued().values()].every((n) => n === 1)).toBe(true);
  });

  it('started while the queue Redis is down: the replica starts, says so, and enqueues once it is back', async () => {
    const node = queue.nodes[0];
    if (!node) throw new Error('no queue Redis');
    await node.kill();
    let replica: ManagedProcess;
    try {
      replica = await startReplica('down-at-start');
    } finally {
      await node.restart({ keepData: true });
    }
    expect(
      replica.records.some(
        (record) => record['msg'] === 'queue redis not reachable yet: starting; pause flags are read once it is',
      ),
    ).toBe(true);
    await replica.waitForLine(
      (line) => line.includes('"msg":"tick enqueued"'),
      'an enqueue once the queue Redis is back',
      20_000,
    );
    await replica.stop('SIGTERM');
  });

  it('the read-only HTTP API: every schedule with its state and next ticks, one schedule with its histories', async () => {
    const replica = await startReplica('api');
    await replica.waitForLine(
      (line) => line.includes('"msg":"tick enqueued"') && line.includes('e2e/alpha'),
      'an enqueue',
    );
    const base = `http://127.0.0.1:${ports.get('api')}`;
    const get = async (path: string, init?: RequestInit) => {
      const response = await fetch(`${base}${path}`, init);
      return { status: response.status, body: (await response.json()) as Record<string, unknown> };
    };
    const all = await get('/api/schedules');
    expect(all.status).toBe(200);
    const listed = all.body['schedules'] as Record<string, unknown>[];
    expect(all.body).toMatchObject({ total: 2, offset: 0 });
    expect(listed.map((schedule) => schedule['id'])).toEqual(['e2e/alpha', 'e2e/beta']);
    expect(listed[0]).toMatchObject({ team: 'e2e', cron: '* * * * * *', timezone: 'UTC', state: 'active' });
    expect((listed[0]?.['next'] as string[]).length).toBe(3);
    // Pages of at most 1,000: a replica with 100,000 schedules answers one page at a time.
    expect(
      ((await get('/api/schedules?limit=1&offset=1')).body['schedules'] as Record<string, unknown>[]).map(
        (schedule) => schedule['id'],
      ),
    ).toEqual(['e2e/beta']);
    expect((await get('/api/schedules?limit=1001')).status).toBe(400);
    await waitUntil(
      async () => ((await get('/api/schedules/e2e/alpha?count=2')).body['ticks'] as unknown[]).length === 2,
      'two tick records',
    );
    const one = await get('/api/schedules/e2e/alpha?count=2');
    expect(one.body).toMatchObject({ id: 'e2e/alpha', runs: [], actions: [] });
    expect(
      (one.body['ticks'] as { outcome: string }[]).every(
        (tick) => tick.outcome === 'enqueued' || tick.outcome === 'recovered',
      ),
    ).toBe(true);
    expect((await get('/api/schedules/e2e/nope')).status).toBe(404);
    expect((await get('/api/schedules/e2e/alpha?count=0')).status).toBe(400);
    expect((await get('/api/schedules', { method: 'POST' })).status).toBe(405);
    await replica.stop('SIGTERM');
  });

  it('an invalid config makes the process exit non-zero with every error named', async () => {
    const refused = await runOnBrokenConfig({
      role: 'scheduler',
      name: 'bad',
      main: MAIN,
      lockNodes: locks.urls,
      queueRedis: queue.urls[0],
      logLevel: 'info',
    });
    expect(refused.code).toBe(2);
    for (const at of refused.errorsAt) expect(refused.output).toContain(at);

    // Lock node 3 reached through a proxy a second time, as entry 4: distinct URLs, one server (its run_id).
    const aliased = startAppProcess({
      role: 'scheduler',
      name: 'aliased',
      main: MAIN,
      configDir: dir,
      lockNodes: [...locks.urls, (await locks.link('aliased')).urls[2]].join(','),
      queueRedis: queue.urls[0],
      logLevel: 'info',
      env: { TICKWARDEN_LOCK_QUORUM: '4' },
    });
    expect((await aliased.exited).code).toBe(2);
    expect(aliased.records.find((r) => r['level'] === 50)?.['msg']).toMatch(
      /^TICKWARDEN_LOCK_NODES entry 3 \(.+\) and TICKWARDEN_LOCK_NODES entry 6 \(.+\) are one Redis server/,
    );
  });

  it('hot reload: an added schedule starts, a bad file is rejected and the last good config keeps firing', async () => {
    const replica = await startReplica('reload');
    writeFileSync(
      path.join(dir, 'late.yaml'),
      'team: late\nschedules:\n  - name: gamma\n    cron: "* * * * * *"\n    handler: { kind: command, argv: ["true"] }\n    overlap: allow\n    leaseTtl: 2s\n',
    );
    await replica.waitForLine((line) => line.includes('config reloaded'), 'reload');
    await replica.waitForLine(
      (line) => line.includes('"schedule":"late/gamma"') && line.includes('"outcome":"enqueued"'),
      'gamma enqueued',
    );
    writeFileSync(path.join(dir, 'late.yaml'), 'team: late\nschedules:\n  - name: gamma\n    cron: "not a cron"\n');
    await replica.waitForLine((line) => line.includes('config reload rejected'), 'rejection');
    const rejectedAt = replica.lines.length;
    await sleep(2500);
    const after = replica.lines.slice(rejectedAt).join('\n');
    expect(after).toContain('"schedule":"late/gamma"');
    expect(replica.lines.some((line) => line.includes('late.yaml:4') && line.includes('cron'))).toBe(true);
    rmSync(path.join(dir, 'late.yaml'));
    await replica.waitForLine(
      (line) => line.split('config reloaded').length > 1 && line.includes('"schedules":2'),
      'removal applied',
    );
    expect((await replica.stop()).code).toBe(0);
  });
});
