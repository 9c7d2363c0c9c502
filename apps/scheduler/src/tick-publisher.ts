import { randomInt } from 'node:crypto';
import type { JobQueue, Publication, Run } from './ports.ts';
import type { TickRecorder } from './tick-recorder.ts';

/** What a publish is recorded as: a won contest, a recovery, or an operator's (`tickwarden trigger`, `backfill`). */
export type PublishAs = 'enqueued' | 'recovered' | 'triggered' | 'backfilled';

/** What became of a run: its job added by us, or by another publisher first; the add failed; or it was not tried (past the start deadline). */
export type Published = 'published' | 'published-by-another' | 'failed' | 'not-added';

/**
 * A number naming one publication of a tick (a job's `lease.fence`, its first start's start id):
 * random, so that a tick published again after the queue Redis lost its job gets another, and its
 * second job cannot start once the first one's did.
 */
export function newPublication(): number {
  return randomInt(1, 2 ** 48);
}

/**
 * Whether our add made the tick's job: the stored job carries our replica and our publication.
 * Another stored job, or only a publish marker, means another publisher (a slow winner, or a
 * recoverer) got there first.
 */
export function addedByUs(publication: Publication, replicaId: string, run: Pick<Run, 'publication'>): boolean {
  return (
    publication.state === 'stored' &&
    publication.enqueuedBy === replicaId &&
    publication.publication === run.publication
  );
}

export interface TickPublisherOptions {
  replicaId: string;
  queue: JobQueue;
  recorder: TickRecorder;
  /** Wall time, ms. */
  now: () => number;
}

/**
 * The one path that publishes a tick (a won contest, a recovery, a manual trigger, a backfill):
 * checks that the tick is still within its start deadline, adds the job, reads back whose job
 * holds the tick, and records the outcome. A run it cannot publish stays open: recovery retries
 * it until its deadline. No lease is held meanwhile: the job carries the tick's claim, and its
 * worker takes the schedule's lease when the run starts.
 */
export class TickPublisher {
  readonly #options: TickPublisherOptions;

  constructor(options: TickPublisherOptions) {
    this.#options = options;
  }

  /** Publishes the runs; per run, what became of it. */
  async publish(runs: readonly Run[], as: PublishAs): Promise<Published[]> {
    if (runs.length === 0) return [];
    const { queue, recorder, replicaId, now } = this.#options;
    const result = new Map<Run, Published>();
    // Nothing publishes a tick after its start deadline: past it the tick's claim and publish
    // marker may be gone (they are kept a margin longer), so a second run would not be stopped.
    const ready = runs.filter((run) => {
      const may = now() <= run.tick.dueMs + run.tick.startDeadlineMs;
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
    const publications = await queue.publications(added.map((run) => run.tick));
    added.forEach((run, i) => {
      const publication = publications[i] as Publication;
      if (addedByUs(publication, replicaId, run)) {
        result.set(run, 'published');
        recorder.outcome(as, run.tick);
        return;
      }
      result.set(run, 'published-by-another');
      recorder.observe('lost-race', run.tick, { jobId: run.tick.jobId, by: publication.state });
    });
    return runs.map((run) => result.get(run) ?? 'failed');
  }
}
