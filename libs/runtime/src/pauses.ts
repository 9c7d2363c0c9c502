import type { Redis } from 'ioredis';

/**
 * The paused schedules (`tickwarden pause`), in the queue Redis: a hash of schedule id to the
 * pause's record (JSON: who, when, why). Replicas and operators write it; workers read it when a
 * run starts, so a pause wins over a job enqueued before it.
 */
export const PAUSED_KEY = 'tickwarden:control:paused';

/** Whether the schedule is paused now (one HEXISTS). */
export async function pausedNow(redis: Redis, scheduleId: string): Promise<boolean> {
  return (await redis.hexists(PAUSED_KEY, scheduleId)) === 1;
}
