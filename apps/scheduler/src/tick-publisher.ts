import type { Lease } from '@tickwarden/redlock';
import type { JobQueue, LeaseGrants, Publication, Run } from './ports.ts';
import type { TickRecorder } from './tick-recorder.ts';

/** What a publish is recorded as: a won contest, a recovery, or an operator's (`tickwarden trigger`, `backfill`). */
export type PublishAs = 'enqueued' | 'recovered' | 'triggered' | 'backfilled';

/** What became of a run: its job added by us, or by another publisher first; the add failed; or it was not tried (lease lapsed, or past the start deadline). */
export type Published = 'published' | 'published-by-another' | 'failed' | 'not-added';

/** Whose job holds a tick after our add: ours, another publisher's (under `value`), or none left (it ran, and was removed). */
export type Holder = { ours: true } | { ours: false; value: string | undefined };

/**
 * Whether our add made the tick's job: the stored job carries our replica and our lease's fence
 * (a fence is granted once). Another stored job, or only a publish marker, means another
 * publisher (a slow winner, or a recoverer) got there first.
 */
export function holderAfterAdd(publication: Publication, replicaId: string, lease: Pick<Lease, 'fence'>): Holder {
  if (publication.state === 'stored') {
    return publication.enqueuedBy === replicaId && publication.fence === lease.fence
      ? { ours: true }
      : { ours: false, value: publication.value };
  }
  return { ours: false, value: undefined };
}

export interface TickPublisherOptions {
  replicaId: string;
  leases: LeaseGrants;
  queue: JobQueue;
  recorder: TickRecorder;
  /** Wall time, ms. */
  now: () => number;
}

/**
 * The one path that publishes a tick (a won contest, a recovery, a manual trigger): checks that
 * the lease is still valid and the tick still within its start deadline, adds the job, reads
 * back whose job holds the tick, releases a lease that another job's lease replaced, and records
 * the outcome.
 * A run it cannot publish stays open: recovery retries it until its deadline.
 */
export class TickPublisher {
  readonly #options: TickPublisherOptions;

  constructor(options: TickPublisherOptions) {
    this.#options = options;
  }

  /** Publishes the runs; per run, what became of it. */
  async publish(runs: readonly Run[], as: PublishAs): Promise<Published[]> {
    if (runs.length === 0) return [];
    const { leases, queue, recorder, replicaId } = this.#options;
    const result = new Map<Run, Published>();
    const ready = runs.filter((run) => {
      const may = this.#mayAdd(run);
      if (!may) result.set(run, 'not-added');
      return may;
    });
    const errors = await queue.add(ready);
    const added = ready.filter((run, i) => {
      const error = errors[i];
      if (error) {
        recorder.observe('enqueue-failed', run.tick, { err: error, jobId: run.tick.jobId });
        result.set(run, 'failed');
      }
      return !error;
    });
    // A job that could not be added keeps its lease: recovery takes that lease over by its value (the
    // claim's), and releasing it could take a live owner's lease away when this publisher is a recoverer.
    const release: Lease[] = [];
    const publications = await queue.publications(added.map((run) => run.tick));
    added.forEach((run, i) => {
      const holder = holderAfterAdd(publications[i] as Publication, replicaId, run.lease);
      result.set(run, holder.ours ? 'published' : 'published-by-another');
      if (holder.ours) {
        recorder.outcome(as, run.tick, { fence: run.lease.fence });
        return;
      }
      recorder.observe('lost-race', run.tick, { jobId: run.tick.jobId, by: publications[i]?.state });
      // Another job holds the tick: our lease must go unless that job carries it (a recovery under the winner's value),
      // or the worker could not take over the stored lease (it re-acquires only a free resource).
      if (holder.value !== run.lease.value) release.push(run.lease);
    });
    if (release.length > 0) await leases.releaseBatch(release);
    return runs.map((run) => result.get(run) ?? 'failed');
  }

  /**
   * A publisher paused past its lease's validity (GC, SIGSTOP) must not add under a lapsed lease,
   * and nothing publishes a tick after its start deadline: past it the tick's claim and publish
   * marker may be gone (they are kept a lease TTL and a margin longer), so a second run would not
   * be stopped. The check comes right before the add; the add happens inside the lease's validity.
   */
  #mayAdd({ tick, lease }: Run): boolean {
    const { leases, now, recorder } = this.#options;
    if (now() > tick.dueMs + tick.startDeadlineMs) return false;
    if (leases.settings.clock.now() < lease.validUntil) return true;
    recorder.observe('lease-lapsed', tick, { jobId: tick.jobId });
    return false;
  }
}
