/**
 * What one node told a waiter it handed the lock to: the fence the handoff set, and a time (the
 * waiter's monotonic clock) before which that node cannot have set the key, so the key outlives
 * `since + ttl` less drift.
 */
export interface Handoff {
  readonly fence: number;
  readonly since: number;
}

/**
 * The lease that handoffs make, if they make one: a quorum of nodes handed the lock with one
 * fence (a lease needs the same token on a quorum, so that every earlier and later holder meets it
 * on a node they share), and the latest `since` that a quorum of those nodes share (the lease is
 * valid while a quorum of its keys live).
 */
export function handedLease(handoffs: ReadonlyMap<number, Handoff>, quorum: number): Handoff | undefined {
  const byFence = new Map<number, number[]>();
  for (const { fence, since } of handoffs.values()) {
    const sinces = byFence.get(fence);
    if (sinces) sinces.push(since);
    else byFence.set(fence, [since]);
  }
  for (const [fence, sinces] of byFence) {
    if (sinces.length < quorum) continue;
    sinces.sort((a, b) => b - a);
    return { fence, since: sinces[quorum - 1] as number };
  }
  return undefined;
}

/**
 * Whether an attempt can no longer win: neither its grants nor the handoffs nodes voted for it
 * (`handed`) can reach a quorum with the nodes still silent. A handoff counts as a possible win:
 * deciding before the silent nodes answer would give back the handoffs heard so far while the
 * others still hand the lock over, leaving it held there for its TTL with nobody to take it until
 * the waiter's next timed retry.
 */
export function lostAttempt(grants: number, handed: number, silent: number, quorum: number): boolean {
  return grants + silent < quorum && handed + silent < quorum;
}
