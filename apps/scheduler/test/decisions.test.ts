// The scheduler's decisions, taken on plain values: no Redis, no timers.
import { ClaimAlreadyGrantedError, LockTakenError, QuorumUnavailableError, type NodeCause } from '@tickwarden/redlock';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import {
  claimTakeover,
  CLOCK_SKEW_TOLERANCE_MS,
  contestLoss,
  cutFromQuorum,
  pausesLost,
  QUORUM_PROBE_INTERVAL_MS,
  TickContest,
} from '../src/tick-contest.ts';
import { ContestQueue } from '../src/contest-queue.ts';
import { Contenders, CONTENDER_BEAT_MS, CONTENDER_LIVE_MS, hash32, preferredContender } from '../src/contenders.ts';
import { splitLateTicks } from '../src/tick-loop.ts';
import type { ClaimGrants, JobQueue, LockQuorum, Run, Tick } from '../src/ports.ts';
import { addedByUs, TickPublisher } from '../src/tick-publisher.ts';
import { TickRecorder } from '../src/tick-recorder.ts';
import { lastFailureOf, parseJobId, resolution } from '../src/tick-resolver.ts';
import { LATE_TICK_WINDOW_MS, retentionFrom, tickWindow } from '../src/tick-window.ts';
import { ManualClock } from './support.ts';

const causes = (...votes: NodeCause[]) => new Map(votes.map((vote, i) => [`node-${i}:6379`, vote]));

describe('tickWindow: how late a run may start, and how long whether a tick ran is kept', () => {
  const schedule = { startDeadlineMs: undefined, leaseTtlMs: 3000, catchUpMs: 0 };

  it('without startDeadline: until the next tick is due, but at least leaseTtl plus the late window, at most 24 h', () => {
    expect(tickWindow(schedule, 0, 1000).startDeadlineMs).toBe(3000 + LATE_TICK_WINDOW_MS);
    expect(tickWindow(schedule, 0, 3_600_000).startDeadlineMs).toBe(3_600_000);
    expect(tickWindow(schedule, 0, 7 * 86_400_000).startDeadlineMs).toBe(86_400_000);
    expect(tickWindow(schedule, 0, undefined).startDeadlineMs).toBe(86_400_000);
    expect(tickWindow({ ...schedule, startDeadlineMs: 500 }, 0, 3_600_000).startDeadlineMs).toBe(500);
  });

  it('the retention covers the deadline and catchUp, plus a lease TTL and a margin', () => {
    expect(tickWindow(schedule, 0, 1000).retentionMs).toBe(13_000 + 3000 + 60_000);
    expect(tickWindow({ ...schedule, catchUpMs: 3_600_000 }, 0, 1000).retentionMs).toBe(3_600_000 + 3000 + 60_000);
  });

  it('a tick contested or enqueued ahead keeps its state the retention past its due time, not past the contest', () => {
    const tick = { dueMs: 120_000, retentionMs: 76_000 };
    expect(retentionFrom(tick, 60_000)).toBe(60_000 + 76_000);
    expect(retentionFrom(tick, 120_000)).toBe(76_000);
    // Contested late (recovery, catch-up): counted from now, never shorter.
    expect(retentionFrom(tick, 150_000)).toBe(76_000);
  });
});

describe('splitLateTicks: a replica back from a stall contests only what is fresh', () => {
  const pending = (scheduleId: string, tickMs: number) => ({ scheduleId, tickMs, dueMs: tickMs, contestAtMs: tickMs });

  it('ticks within the late window are contested; older ones go to recovery', () => {
    const now = 100_000;
    const { kept, late } = splitLateTicks(
      [pending('a/x', now - 11_000), pending('a/x', now - 9000), pending('b/y', now - 30_000)],
      now,
      () => 0,
    );
    expect(kept.map((tick) => tick.tickMs)).toEqual([now - 9000]);
    expect(late.map((tick) => tick.tickMs)).toEqual([now - 11_000, now - 30_000]);
  });

  it('of a schedule with no fresh tick, the latest inside catchUp is contested (a replica catching up)', () => {
    const now = 1_000_000;
    const ticks = [pending('c/z', now - 300_000), pending('c/z', now - 120_000)];
    expect(splitLateTicks(ticks, now, () => 180_000).kept.map((tick) => tick.tickMs)).toEqual([now - 120_000]);
    expect(splitLateTicks(ticks, now, () => 60_000).kept).toEqual([]);
    expect(
      splitLateTicks([...ticks, pending('c/z', now - 1000)], now, () => 180_000).kept.map((tick) => tick.tickMs),
    ).toEqual([now - 1000]);
  });
});

describe('contestLoss: what a failed contest means', () => {
  it('a claim granted elsewhere is a lost race, on a quorum or on some nodes', () => {
    expect(contestLoss(new ClaimAlreadyGrantedError('r', 'tick:1', 'v', causes('claimed', 'claimed')))).toBe(
      'lost-race',
    );
    expect(
      contestLoss(
        new QuorumUnavailableError('r', 'acquire', causes('claimed', new Error('down'), new Error('down')), 2),
      ),
    ).toBe('lost-race');
  });

  it('a claim split among contenders (held elsewhere on too many nodes for any value to win) is a lost race', () => {
    expect(contestLoss(new LockTakenError('r', causes('claimed', 'claimed', 'claimed'), 5))).toBe('lost-race');
  });

  it('anything else is no quorum', () => {
    expect(
      contestLoss(new QuorumUnavailableError('r', 'acquire', causes(new Error('timeout'), new Error('down')), 2)),
    ).toBe('unavailable');
  });

  it('a claim a worker started (`<value>|<start>`), on a quorum or on any node, is "started": the tick ran', () => {
    expect(contestLoss(new ClaimAlreadyGrantedError('r', 'tick:1', 'v|17', causes('claimed', 'claimed')))).toBe(
      'started',
    );
    expect(
      contestLoss(
        new QuorumUnavailableError(
          'r',
          'acquire',
          causes('claimed', 'claimed', new Error('down')),
          3,
          new Map([
            ['v', 1],
            ['v|17', 1],
          ]),
        ),
      ),
    ).toBe('started');
  });
});

describe("claimTakeover: the value recovery takes a tick's claim over with", () => {
  it('the value a quorum granted the claim to', () => {
    expect(
      claimTakeover(new ClaimAlreadyGrantedError('r', 'tick:1', 'winner', causes('claimed', 'claimed', 'claimed'))),
    ).toBe('winner');
  });

  it('a split left by contenders that died mid-contest: the value on more nodes than any other, none on a tie', () => {
    const split = (...holders: [string, number][]) =>
      new QuorumUnavailableError('r', 'acquire', causes('claimed', 'claimed', new Error('down')), 3, new Map(holders));
    expect(claimTakeover(split(['b', 1], ['a', 2]))).toBe('a');
    expect(claimTakeover(split(['a', 2], ['b', 2], ['c', 1]))).toBeUndefined();
    expect(claimTakeover(split(['c', 1], ['a', 2], ['b', 2], ['d', 3]))).toBe('d');
    expect(
      claimTakeover(
        new LockTakenError(
          'r',
          causes('claimed', 'claimed', 'claimed'),
          5,
          new Map([
            ['z', 1],
            ['y', 1],
          ]),
        ),
      ),
    ).toBeUndefined();
  });

  it('none when a job of the tick started, on a quorum or on one node: it must never run again', () => {
    expect(
      claimTakeover(new ClaimAlreadyGrantedError('r', 'tick:1', 'winner|17', causes('claimed', 'claimed', 'claimed'))),
    ).toBeUndefined();
    expect(
      claimTakeover(
        new QuorumUnavailableError(
          'r',
          'acquire',
          causes('claimed', 'claimed', new Error('down')),
          3,
          new Map([
            ['winner', 2],
            ['winner|17', 1],
          ]),
        ),
      ),
    ).toBeUndefined();
  });

  it('none when no claim is held: a lease taken, or no quorum', () => {
    expect(claimTakeover(new LockTakenError('r', causes('taken', 'taken', 'taken'), 5))).toBeUndefined();
    expect(
      claimTakeover(new QuorumUnavailableError('r', 'acquire', causes(new Error('timeout'), new Error('down')), 2)),
    ).toBeUndefined();
  });
});

describe('resolution: what recovery does with an open tick', () => {
  const tick = { dueMs: 10_000, startDeadlineMs: 5000 };
  const none = { state: 'none' } as const;

  it("recorded meanwhile: closed; published but not recorded: recorded on the publisher's behalf", () => {
    expect(resolution({ recorded: true, publication: none, nowMs: 12_000, tick, lastFailure: undefined })).toEqual({
      kind: 'closed',
    });
    const stored = { state: 'stored', enqueuedBy: 'r1', publication: 7, value: 'v' } as const;
    expect(resolution({ recorded: false, publication: stored, nowMs: 12_000, tick, lastFailure: undefined })).toEqual({
      kind: 'found',
      publication: stored,
    });
    // The job ran and was removed: its publish marker says so, whatever catch-up or recovery asks later.
    expect(
      resolution({ recorded: false, publication: { state: 'gone' }, nowMs: 99_000, tick, lastFailure: undefined }),
    ).toEqual({ kind: 'found', publication: { state: 'gone' } });
  });

  it('never published: contested until its start deadline, then missed with the last failure seen', () => {
    expect(
      resolution({ recorded: false, publication: none, nowMs: 15_000, tick, lastFailure: 'no-lock-quorum' }),
    ).toEqual({ kind: 'contest' });
    expect(
      resolution({ recorded: false, publication: none, nowMs: 15_001, tick, lastFailure: 'no-lock-quorum' }),
    ).toEqual({ kind: 'missed', reason: 'no-lock-quorum' });
    expect(resolution({ recorded: false, publication: none, nowMs: 15_001, tick, lastFailure: undefined })).toEqual({
      kind: 'missed',
      reason: 'deadline-passed',
    });
  });

  it("a miss names the last failure seen: the tick's own try, or a failed look at the open ticks after it and after the tick was due, or this replica cut from the lock quorum", () => {
    const due = { dueMs: 10_000 };
    const tried = { reason: 'no-lock-quorum', atMs: 12_000 } as const;
    expect(lastFailureOf(tried, undefined, due, false)).toBe('no-lock-quorum');
    // The queue Redis stopped answering after the try: nothing could try the tick since.
    expect(lastFailureOf(tried, 13_000, due, false)).toBe('queue-unavailable');
    expect(lastFailureOf(tried, 11_000, due, false)).toBe('no-lock-quorum');
    expect(lastFailureOf(undefined, 11_000, due, false)).toBe('queue-unavailable');
    // A look that failed before the tick was due says nothing of it.
    expect(lastFailureOf(undefined, 9000, due, false)).toBeUndefined();
    // Never tried here (another replica took it until its deadline), and this replica is cut from the lock quorum.
    expect(lastFailureOf(undefined, undefined, due, true)).toBe('no-lock-quorum');
    expect(lastFailureOf({ reason: 'queue-unavailable', atMs: 12_000 }, undefined, due, true)).toBe(
      'queue-unavailable',
    );
  });

  it('job ids split into schedule and tick', () => {
    expect(parseJobId('team-a/nightly@1795696825000')).toEqual({ scheduleId: 'team-a/nightly', tickMs: 1795696825000 });
    expect(parseJobId('team-a/nightly@manual-1')).toBeUndefined();
    expect(parseJobId('no-at-sign')).toBeUndefined();
  });
});

describe('addedByUs: whose job holds the tick after our add', () => {
  it("ours when the stored job has our replica and our publication; another publisher's otherwise", () => {
    const stored = { state: 'stored', enqueuedBy: 'r1', publication: 7, value: 'v' } as const;
    expect(addedByUs(stored, 'r1', { publication: 7 })).toBe(true);
    expect(addedByUs(stored, 'r1', { publication: 8 })).toBe(false);
    expect(addedByUs(stored, 'r2', { publication: 7 })).toBe(false);
    expect(addedByUs({ state: 'gone' }, 'r1', { publication: 7 })).toBe(false);
  });
});

describe('TickPublisher: what it records after an add', () => {
  const run = (id: string, publication: number, dueMs = 1000): Run => ({
    tick: {
      schedule: { id },
      tickMs: dueMs,
      dueMs,
      jobId: `${id}@${dueMs}`,
      startDeadlineMs: 60_000,
      retentionMs: 120_000,
    } as Tick,
    claim: { resource: `run:${id}`, claim: `tick:${dueMs}`, value: 'v' },
    publication,
  });
  const publisher = (queue: Pick<JobQueue, 'add' | 'publications'>, outcomes: string[]) => {
    const recorder = new TickRecorder({
      replicaId: 'r1',
      store: { record: async (entries) => entries.map(() => true) },
      logger: pino({ level: 'silent' }),
      now: () => 2000,
      onOutcome: (event) => void outcomes.push(`${event.scheduleId} ${event.outcome}`),
    });
    const tickPublisher = new TickPublisher({
      replicaId: 'r1',
      queue: { ...queue, close: () => Promise.resolve() },
      recorder,
      now: () => 2000,
    });
    return { publish: (runs: Run[]) => tickPublisher.publish(runs, 'recovered'), flush: () => recorder.flush() };
  };

  it('a failed add is left to recovery; a job another publisher added first is not ours to record; a tick past its deadline is not added', async () => {
    const failed = run('t/failed', 1);
    const theirs = run('t/theirs', 2);
    const mine = run('t/mine', 3);
    const late = run('t/late', 4, -60_000);
    const added: string[] = [];
    const queue = {
      add: async (runs: readonly Run[]) =>
        runs.map((r) => (added.push(r.tick.schedule.id), r === failed ? new Error('add failed') : undefined)),
      publications: async (ticks: readonly Tick[]) =>
        ticks.map(
          (tick) =>
            ({
              state: 'stored',
              enqueuedBy: tick.schedule.id === 't/mine' ? 'r1' : 'r2',
              publication: tick.schedule.id === 't/mine' ? 3 : 9,
              value: 'v',
            }) as const,
        ),
    };
    const outcomes: string[] = [];
    const { publish, flush } = publisher(queue, outcomes);
    expect(await publish([failed, theirs, mine, late])).toEqual([
      'failed',
      'published-by-another',
      'published',
      'not-added',
    ]);
    await flush();
    expect(added).toEqual(['t/failed', 't/theirs', 't/mine']);
    expect(outcomes).toEqual(['t/mine recovered']);
  });
});

describe('TickRecorder: a record that cannot be written is never silent', () => {
  it('a triggered run whose history write failed is logged at warn (the CLI prints it); one written is not logged', async () => {
    const lines: Record<string, unknown>[] = [];
    const logger = pino(
      { level: 'info' },
      { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) },
    );
    const tick = {
      schedule: { id: 't/manual' },
      tickMs: 1000,
      jobId: 't/manual@m1000',
      retentionMs: 60_000,
    } as Parameters<TickRecorder['outcome']>[1];
    const failing = new TickRecorder({
      replicaId: 'cli',
      store: { record: () => Promise.reject(new Error('NOPERM')) },
      logger,
      now: () => 2000,
    });
    failing.outcome('triggered', tick);
    await failing.flush();
    expect(lines).toEqual([
      expect.objectContaining({
        level: 40,
        msg: 'triggered run not recorded in the tick history',
        schedule: 't/manual',
        outcome: 'triggered',
        historyError: 'NOPERM',
      }),
    ]);
    const writing = new TickRecorder({
      replicaId: 'cli',
      store: { record: async (entries) => entries.map(() => true) },
      logger,
      now: () => 2000,
    });
    writing.outcome('triggered', tick);
    await writing.flush();
    expect(lines).toHaveLength(1);
  });
});

/** A due tick for TickContest: a 3 s lease, due at 1000. */
function contestTick(id: string, overlap: 'skip' | 'allow'): Tick {
  return {
    schedule: { id, overlap, leaseTtlMs: 3000, paused: false },
    tickMs: 1000,
    dueMs: 1000,
    nextDueMs: 2000,
    jobId: `${id}@1000`,
    startDeadlineMs: 60_000,
    retentionMs: 120_000,
  } as unknown as Tick;
}

describe('TickContest: a replica cut from a lock quorum leaves no claims behind', () => {
  const silent = causes(
    new Error('no answer within 301 ms'),
    new Error('no answer within 301 ms'),
    new Error('no answer within 301 ms'),
    'taken',
  );

  it('cutFromQuorum: more nodes silent than a quorum can spare; a vote is an answer', () => {
    expect(cutFromQuorum(new QuorumUnavailableError('r', 'acquire', silent, 3), 5, 3)).toBe(true);
    expect(
      cutFromQuorum(
        new QuorumUnavailableError('r', 'acquire', causes(new Error('x'), new Error('y'), 'taken', 'taken'), 3),
        5,
        3,
      ),
    ).toBe(false);
    expect(cutFromQuorum(new LockTakenError('r', causes('taken', 'taken', 'taken'), 1), 5, 3)).toBe(false);
  });

  it('after such an acquire it contests nothing (each tick fails as unavailable) until a probe, at most every QUORUM_PROBE_INTERVAL_MS, finds a quorum', async () => {
    const tick = (id: string) => contestTick(id, 'skip');
    let nowMs = 0;
    let quorumBack = false;
    const acquired: string[] = [];
    const probes: number[] = [];
    const leases: ClaimGrants & LockQuorum = {
      nodes: [0, 1, 2, 3, 4],
      quorum: 3,
      claimBatch: async (requests) =>
        requests.map(
          (request) => (
            acquired.push(request.resource),
            {
              resource: request.resource,
              ok: false,
              error: new QuorumUnavailableError(request.resource, 'claim', silent, 3),
            }
          ),
        ),
      probe: async (overrides) => (
        probes.push(overrides?.nodeTimeoutMs ?? 0),
        { quorum: quorumBack, unreachable: new Map() }
      ),
    };
    const contest = new TickContest({
      leases,
      store: { pausedInEpoch: async () => ({ epoch: 'e', paused: new Map() }), pause: async () => undefined },
      logger: pino({ level: 'silent' }),
      now: () => nowMs,
    });
    await contest.contest([tick('t/a')]);
    const [gated] = await contest.contest([tick('t/b')], true);
    expect(acquired).toEqual(['run:t/a']);
    expect(probes).toEqual([]);
    expect(gated?.result.ok === false && contestLoss(gated.result.error)).toBe('unavailable');
    nowMs = QUORUM_PROBE_INTERVAL_MS;
    await contest.contest([tick('t/c')]);
    expect([acquired, probes]).toEqual([['run:t/a'], [301]]);
    quorumBack = true;
    nowMs = 2 * QUORUM_PROBE_INTERVAL_MS;
    await contest.contest([tick('t/d')]);
    expect([acquired, probes]).toEqual([
      ['run:t/a', 'run:t/d'],
      [301, 301],
    ]);
  });
});

describe('TickContest: what it asks of the lock nodes', () => {
  it("the tick's claim alone, whatever its overlap policy: one call for the batch, retried for split claims, kept for the longest retention past the due time", async () => {
    const calls: { claims: string[]; retryCount: number | undefined; retention: number | undefined }[] = [];
    const leases: ClaimGrants & LockQuorum = {
      nodes: [0, 1, 2],
      quorum: 2,
      claimBatch: async (requests, options) => {
        calls.push({
          claims: requests.map((r) => `${r.resource} ${r.claim}`),
          retryCount: options?.retryCount,
          retention: options?.claimRetentionMs,
        });
        return requests.map((r) => ({ resource: r.resource, ok: true, claim: { ...r, value: 'v' } }));
      },
      probe: async () => ({ quorum: true, unreachable: new Map() }),
    };
    const contest = new TickContest({
      leases,
      store: { pausedInEpoch: async () => ({ epoch: 'e', paused: new Map() }), pause: async () => undefined },
      logger: pino({ level: 'silent' }),
      now: () => 0,
    });
    const won = await contest.contest([contestTick('t/skip', 'skip'), contestTick('t/allow', 'allow')]);
    expect(won.map((entry) => entry.result.ok)).toEqual([true, true]);
    // Contested at 0 for ticks due at 1000: the longest retention counts from the due time.
    expect(calls).toEqual([
      { claims: ['run:t/skip tick:1000', 'run:t/allow@1000 tick:1000'], retryCount: 4, retention: 121_000 },
    ]);
  });
});

describe('pauses and the queue Redis losing its data', () => {
  it('pausesLost: the pauses known before that the store no longer has', () => {
    const record = { by: 'ops', atMs: 1, note: 'freeze' };
    expect(
      pausesLost(
        new Map([
          ['t/a', record],
          ['t/b', record],
        ]),
        new Map([['t/b', record]]),
      ),
    ).toEqual([['t/a', record]]);
    expect(pausesLost(new Map(), new Map([['t/b', record]]))).toEqual([]);
  });

  it('a new epoch with a pause gone: the pause holds here, is written back with a note, and the reset is told once; the same epoch takes what is stored', async () => {
    const record = { by: 'ops', atMs: 1, note: 'freeze' };
    let stored = { epoch: 'first', paused: new Map([['t/a', record]]) };
    const written: [string, { note: string }][] = [];
    let resets = 0;
    const store = {
      pausedInEpoch: async () => stored,
      pause: async (id: string, rec: { note: string }) => void written.push([id, rec]),
    };
    const contest = new TickContest({
      leases: {} as ClaimGrants & LockQuorum,
      store,
      logger: pino({ level: 'silent' }),
      now: () => 0,
      onQueueReset: () => resets++,
    });
    const tickOf = (id: string) => ({ schedule: { id, paused: false } }) as unknown as Tick;
    await contest.refreshPaused();
    expect(contest.isPaused(tickOf('t/a'))).toBe(true);
    stored = { epoch: 'second', paused: new Map() };
    await Promise.all([contest.refreshPaused(), contest.refreshPaused()]);
    expect(contest.isPaused(tickOf('t/a'))).toBe(true);
    expect(written).toEqual([['t/a', { ...record, note: 'freeze (restored after the queue Redis lost its data)' }]]);
    expect(resets).toBe(1);
    // The same epoch from now on: what is stored (here, a resume since) is taken as it is.
    await contest.refreshPaused();
    expect(contest.isPaused(tickOf('t/a'))).toBe(false);
  });
});

describe('preferredContender: one replica contests each tick (rendezvous hashing)', () => {
  const replicas = (...ids: string[]) => ids.map((id) => ({ id, hash: hash32(id) }));
  const keys = Array.from(
    { length: 6000 },
    (_, i) => `team/s${i % 1000}@${1_800_000_000_000 + 1000 * Math.floor(i / 1000)}`,
  );

  it('every replica with the same list picks the same one, whatever the order; shares are even', () => {
    const three = replicas('scheduler-0', 'scheduler-1', 'scheduler-2');
    const counts = new Map<string, number>();
    for (const key of keys) {
      const owner = preferredContender(three, key) as string;
      expect(preferredContender(three.toReversed(), key)).toBe(owner);
      counts.set(owner, (counts.get(owner) ?? 0) + 1);
    }
    expect([...counts.keys()].sort()).toEqual(['scheduler-0', 'scheduler-1', 'scheduler-2']);
    for (const count of counts.values()) expect(Math.abs(count - 2000)).toBeLessThan(200);
  });

  it('a replica leaving moves only the ticks it held; one joining takes about its share from each', () => {
    const three = replicas('a', 'b', 'c');
    const two = replicas('a', 'b');
    const four = replicas('a', 'b', 'c', 'd');
    let moved = 0;
    for (const key of keys) {
      const before = preferredContender(three, key);
      if (before !== 'c') expect(preferredContender(two, key)).toBe(before);
      const after = preferredContender(four, key);
      if (after !== before) {
        expect(after).toBe('d');
        moved++;
      }
    }
    expect(Math.abs(moved - keys.length / 4)).toBeLessThan(300);
    expect(preferredContender([], 'team/a@1')).toBeUndefined();
  });
});

describe('Contenders: the view each replica shares the contests by', () => {
  const logger = pino({ level: 'silent' });
  const tick = (i: number) => ({ jobId: `team/s${i}@1800000000000` });
  const flush = () => new Promise((resolve) => setImmediate(resolve));

  it('contests only its preferred ticks while its view is fresh, every tick without one; it hands its ticks over when it leaves', async () => {
    const clock = new ManualClock(1_800_000_000_000);
    let live = ['r0', 'r1', 'r2'];
    let failing = false;
    const left: string[] = [];
    const views: number[] = [];
    const contenders = new Contenders({
      replicaId: 'r1',
      clock,
      logger,
      canContest: () => true,
      onView: (n) => views.push(n),
      store: {
        beat: async () => {
          if (failing) throw new Error('queue Redis down');
          return { serverMs: clock.wallMicros() / 1000, live };
        },
        leave: async (id) => void left.push(id),
      },
    });
    const mine = () => Array.from({ length: 300 }, (_, i) => tick(i)).filter((t) => contenders.prefers(t)).length;
    // Before the first beat answered: no view, every tick.
    expect(mine()).toBe(300);
    contenders.start();
    await contenders.ready;
    expect(mine()).toBeGreaterThan(60);
    expect(mine()).toBeLessThan(140);
    live = ['r1'];
    clock.advance(CONTENDER_BEAT_MS);
    await flush();
    expect(mine()).toBe(300);
    live = ['r0', 'r2'];
    clock.advance(CONTENDER_BEAT_MS);
    await flush();
    // Itself always counts, heard from or not.
    expect(mine()).toBeLessThan(140);
    failing = true;
    const fresh = CONTENDER_LIVE_MS / CONTENDER_BEAT_MS;
    for (let beat = 0; beat <= fresh; beat++) {
      clock.advance(CONTENDER_BEAT_MS);
      await flush();
    }
    expect(mine()).toBe(300);
    // A view stays fresh for CONTENDER_LIVE_MS from the start of its beat; then none.
    expect(views).toEqual([3, 1, 3, ...Array<number>(fresh).fill(3), 0]);
    failing = false;
    clock.advance(CONTENDER_BEAT_MS);
    await flush();
    // Leaving with others in view: a beat and a bit before it resolves, beating no more.
    let done = false;
    const leaving = contenders.leave().then(() => (done = true));
    await flush();
    clock.advance(CONTENDER_BEAT_MS);
    await flush();
    expect(done).toBe(false);
    clock.advance(200);
    await leaving;
    expect(views.length).toBe(fresh + 5);
    expect(left).toEqual(['r1']);
  });

  it('withdraws while it cannot win contests (cut from a lock quorum, or its clock off the queue Redis by more than the tolerance), contesting every tick', async () => {
    const clock = new ManualClock(1_800_000_000_000);
    let cutOff = false;
    let skewMs = 0;
    const registered: boolean[] = [];
    const views: number[] = [];
    const contenders = new Contenders({
      replicaId: 'r1',
      clock,
      logger,
      canContest: () => !cutOff,
      onView: (n) => views.push(n),
      store: {
        beat: async (_id, register) => {
          registered.push(register);
          return { serverMs: clock.wallMicros() / 1000 - skewMs, live: ['r0', 'r2'] };
        },
        leave: async () => undefined,
      },
    });
    const mine = () => Array.from({ length: 300 }, (_, i) => tick(i)).filter((t) => contenders.prefers(t)).length;
    const beat = async () => {
      clock.advance(CONTENDER_BEAT_MS);
      await flush();
    };
    contenders.start();
    await contenders.ready;
    expect(mine()).toBeLessThan(140);
    cutOff = true;
    await beat();
    expect(mine()).toBe(300);
    cutOff = false;
    await beat();
    expect(mine()).toBeLessThan(140);
    // Measured at one beat, acted on at the next.
    skewMs = CLOCK_SKEW_TOLERANCE_MS + 500;
    await beat();
    await beat();
    expect(mine()).toBe(300);
    skewMs = 0;
    await beat();
    await beat();
    expect(mine()).toBeLessThan(140);
    expect(registered).toEqual([true, false, true, true, false, false, true]);
    expect(views).toEqual([3, 0, 3, 3, 0, 0, 3]);
    const leaving = contenders.leave();
    await flush();
    clock.advance(CONTENDER_BEAT_MS * 2);
    await leaving;
  });
});

describe('ContestQueue: a boundary of many ticks goes through a few batches at a time, soonest first', () => {
  /** A queue whose batches end when the test says so. */
  function queue(maxBatch: number, maxInFlight: number) {
    const started: number[][] = [];
    const finish: (() => void)[] = [];
    const contests = new ContestQueue<{ dueMs: number }>({
      maxBatch,
      maxInFlight,
      run: (batch) => {
        started.push(batch.map((tick) => tick.dueMs));
        return new Promise<void>((resolve) => finish.push(resolve));
      },
    });
    const endNext = async (): Promise<void> => {
      finish.shift()?.();
      await new Promise((resolve) => setImmediate(resolve));
    };
    return { contests, started, endNext };
  }
  const ticks = (...dueMs: number[]) => dueMs.map((ms) => ({ dueMs: ms }));

  it('runs batches of one due second, at most maxBatch ticks, at most maxInFlight of a second at a time', async () => {
    const { contests, started, endNext } = queue(2, 2);
    contests.add(ticks(1000, 1100, 1200, 1300, 1400, 1500, 1600));
    expect(started).toEqual([
      [1000, 1100],
      [1200, 1300],
    ]);
    expect(contests.waiting).toBe(3);
    await endNext();
    expect(started.at(-1)).toEqual([1400, 1500]);
    await endNext();
    await endNext();
    expect(started.at(-1)).toEqual([1600]);
    expect([contests.waiting, contests.size]).toEqual([0, 1]);
    await endNext();
    expect(contests.size).toBe(0);
  });

  it('ticks of another second never wait behind a second whose batches are held up', () => {
    const { contests, started } = queue(1, 1);
    contests.add(ticks(1000, 1500, 2000));
    contests.add(ticks(3000));
    expect(started).toEqual([[1000], [2000], [3000]]);
    expect(contests.waiting).toBe(1);
  });

  it('a tick of a sooner second starts at once; ticks added to a busy second wait for it, in due order', async () => {
    const { contests, started, endNext } = queue(10, 1);
    contests.add(ticks(19_000));
    contests.add(ticks(19_500, 19_200));
    contests.add(ticks(10_000));
    expect(started).toEqual([[19_000], [10_000]]);
    await endNext();
    expect(started.at(-1)).toEqual([19_200, 19_500]);
  });
});
