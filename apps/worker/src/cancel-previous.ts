/** Another job of the same schedule in the queue's active list, as a waiting cancel-previous run sees it. */
export interface ActivePeer {
  jobId: string;
  tickMs: number;
  /** Its handler started (its progress carries the handler-started mark): it may be running. */
  started: boolean;
  /**
   * The earliest lease grant, wall ms, of a later run of the schedule that found it started and
   * active (recorded on the job by that run): its lease was revoked by then.
   */
  revokedByMs: number | undefined;
  /**
   * A run that, when listed, waited for a holder its grant revoked and no list showed (see
   * unseenRevokedUntil): until when (wall ms). Whoever revokes it inherits that wait.
   */
  waitsUntilMs?: number | undefined;
}

/**
 * The peers a run may mark revoked by its own grant (see `revokedByMs`): started runs of earlier
 * ticks not marked yet. Never a later tick's: its lease was granted after this run's, so the mark
 * would let its successor start while it still runs.
 */
export function peersToMarkRevoked(self: { tickMs: number }, peers: readonly ActivePeer[]): ActivePeer[] {
  return peers.filter((peer) => peer.started && peer.revokedByMs === undefined && peer.tickMs < self.tickMs);
}

/**
 * Until when (wall ms) a cancel-previous run must wait for the peers it sees before its handler
 * starts; undefined: it may start now. Only a peer whose handler started can still be running:
 * one that never started has lost its lease and will not start (a run checks its lease after its
 * handler-started mark). A started peer's lease was revoked by the first later run's grant that saw
 * it (that grant, or an earlier one, revoked it), so it cannot be valid past that grant plus a TTL
 * (plus `slackMs` for clocks). A peer still listed active after that is a dead worker's job
 * awaiting BullMQ's stalled check; it must not hold up every later tick until then, which a bound
 * from each run's own grant would do when ticks come faster than a TTL. A peer that was itself
 * waiting for a run no list shows passes that wait on (`waitsUntilMs`).
 */
export function predecessorsWaitUntil(
  self: { grantedAtMs: number; ttlMs: number },
  peers: readonly ActivePeer[],
  slackMs: number,
): number | undefined {
  let until: number | undefined;
  for (const peer of peers) {
    // Revoked while it waited for a run no list shows (its job vanished): that run may still be running.
    if (peer.waitsUntilMs !== undefined) until = Math.max(until ?? -Infinity, peer.waitsUntilMs);
    if (!peer.started) continue;
    until = Math.max(
      until ?? -Infinity,
      Math.min(peer.revokedByMs ?? self.grantedAtMs, self.grantedAtMs) + self.ttlMs + slackMs,
    );
  }
  return until;
}

/**
 * Until when (wall ms) a run must wait for a holder its grant revoked (`revokedMs`: how long that
 * holder's lock had left, Lease.revokedMs) when its first look at the active list showed no run of
 * an earlier tick: the holder's job vanished with the queue Redis's data (its run goes on, in no
 * list) or it ended right then. Undefined when nothing was revoked or such a run was seen (then
 * predecessorsWaitUntil decides).
 */
export function unseenRevokedUntil(
  self: { tickMs: number; grantedAtMs: number; revokedMs: number | undefined },
  firstPeers: readonly ActivePeer[],
  slackMs: number,
): number | undefined {
  if (self.revokedMs === undefined || firstPeers.some((peer) => peer.tickMs < self.tickMs)) return undefined;
  return self.grantedAtMs + self.revokedMs + slackMs;
}
