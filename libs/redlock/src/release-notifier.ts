import type { Clock } from './clock.ts';
import type { LockNode, NodeSubscriber } from './lock-node.ts';

/**
 * A waiting acquire's interest in one channel: `id` is its lease value, which a release names on
 * its inbox when its turn comes; without one it wakes on every message (a resource's channel).
 */
export interface ReleaseListener {
  readonly id: string | undefined;
  /**
   * `release`: a release for it was published (or may have been, during its attempt); `subscribed`:
   * its subscription took effect only after its attempt, so a release in between went unheard.
   */
  wake(cause: 'release' | 'subscribed'): void;
}

interface Channel {
  /** By id (undefined: listeners that hear every message), so a message finds its listener without a scan. */
  readonly listeners: Map<string | undefined, Set<ReleaseListener>>;
  size: number;
  /** When a quorum of nodes had confirmed the subscription (or all answered, or it timed out); undefined before. */
  subscribedAt: number | undefined;
  /** The latest messages and when they arrived, for listeners that join just after them. */
  readonly recent: { at: number; message: string }[];
  idleTimer: unknown;
}

/** A node (its index) handed the lock to a lease value with a fence: a release told the value's inbox. */
export type OnHandoff = (node: number, value: string, fence: number) => void;

/** Messages a channel remembers for late listeners; when all are newer than a listener's attempt, it wakes anyway. */
const RECENT_MESSAGES = 8;

/**
 * Release notifications of one Redlock instance (release.lua publishes them; a handoff goes to
 * `onHandoff`, with the node that made it): one subscriber
 * connection per node, opened when a contender first has to wait, and channel subscriptions
 * counted per channel, kept for `lingerMs` after the last listener left (a contender that loops
 * comes back sooner, and resubscribing would cost it a round trip). Queued waiters listen on the
 * instance's inbox, where a release names only the waiter whose turn it is, so a release wakes one
 * waiter, not every client that waits; waiters that do not queue listen on the resource's channel.
 */
export class ReleaseNotifier {
  readonly #nodes: readonly LockNode[];
  readonly #clock: Clock;
  readonly #quorum: number;
  readonly #lingerMs: number;
  readonly #onHandoff: OnHandoff;
  #subscribers: (NodeSubscriber | undefined)[] | undefined;
  readonly #channels = new Map<string, Channel>();

  constructor(nodes: readonly LockNode[], clock: Clock, quorum: number, lingerMs: number, onHandoff: OnHandoff) {
    this.#nodes = nodes;
    this.#clock = clock;
    this.#quorum = quorum;
    this.#lingerMs = lingerMs;
    this.#onHandoff = onHandoff;
  }

  /**
   * Adds `listener` to `channel`. A message the channel received since `since` (the start of the
   * listener's failed attempt: it may have been published after that attempt ran on a node) wakes
   * it at once, and so does a subscription confirmed only after `since`, when it is confirmed: no
   * release between the attempt and the subscription is missed. Confirmed means by a quorum of
   * nodes: a waiter's turn needs a quorum of nodes naming it first, one of which then tells it. A
   * subscription waits at most `timeoutMs` for that (nodes that are down must not hold it up).
   */
  listen(channel: string, listener: ReleaseListener, since: number, timeoutMs: number): void {
    let entry = this.#channels.get(channel);
    if (!entry) entry = this.#subscribe(channel, timeoutMs);
    this.#clock.clearTimeout(entry.idleTimer);
    entry.idleTimer = undefined;
    let named = entry.listeners.get(listener.id);
    if (!named) entry.listeners.set(listener.id, (named = new Set()));
    named.add(listener);
    entry.size++;
    if (entry.subscribedAt === undefined) return;
    const { recent } = entry;
    if (entry.subscribedAt > since) listener.wake('subscribed');
    else if (
      (recent.length === RECENT_MESSAGES && (recent[0]?.at ?? 0) >= since) ||
      recent.some(({ at, message }) => at >= since && hears(listener, message))
    )
      listener.wake('release');
  }

  /** Removes `listener`; the channel is unsubscribed once nobody listened to it for `lingerMs`. */
  unlisten(channel: string, listener: ReleaseListener): void {
    const entry = this.#channels.get(channel);
    const named = entry?.listeners.get(listener.id);
    if (!entry || !named?.delete(listener)) return;
    if (named.size === 0) entry.listeners.delete(listener.id);
    if (--entry.size > 0) return;
    entry.idleTimer = this.#clock.setTimeout(() => {
      this.#channels.delete(channel);
      for (const subscriber of this.#subscribers ?? []) subscriber?.unsubscribe(channel);
    }, this.#lingerMs);
  }

  #subscribe(channel: string, timeoutMs: number): Channel {
    this.#subscribers ??= this.#nodes.map((node, index) =>
      node.openSubscriber?.((from, message) => this.#deliver(index, from, message)),
    );
    const entry: Channel = { listeners: new Map(), size: 0, subscribedAt: undefined, recent: [], idleTimer: undefined };
    this.#channels.set(channel, entry);
    const subscribed = (): void => {
      if (entry.subscribedAt !== undefined) return;
      this.#clock.clearTimeout(timer);
      entry.subscribedAt = this.#clock.now();
      for (const named of entry.listeners.values()) for (const listener of named) listener.wake('subscribed');
    };
    const timer = this.#clock.setTimeout(subscribed, timeoutMs);
    const subscribers = this.#subscribers.filter((subscriber) => subscriber !== undefined);
    let confirmed = 0;
    let answered = 0;
    for (const subscriber of subscribers) {
      const answer = (ok: boolean): void => {
        if (ok) confirmed++;
        if (confirmed >= this.#quorum || ++answered === subscribers.length) subscribed();
      };
      subscriber.subscribe(channel).then(
        () => answer(true),
        () => answer(false),
      );
    }
    return entry;
  }

  #deliver(node: number, channel: string, message: string): void {
    // '<value>|<fence>': the node handed the lock to that value (waiters.lua), not a wake-up.
    const bar = message.indexOf('|');
    if (bar >= 0) {
      this.#onHandoff(node, message.slice(0, bar), Number(message.slice(bar + 1)));
      return;
    }
    const entry = this.#channels.get(channel);
    if (!entry) return;
    entry.recent.push({ at: this.#clock.now(), message });
    if (entry.recent.length > RECENT_MESSAGES) entry.recent.shift();
    for (const listener of entry.listeners.get(message) ?? []) listener.wake('release');
    for (const listener of entry.listeners.get(undefined) ?? []) listener.wake('release');
  }

  /** Closes the subscriber connections (a waiter left falls back to its retry delay). */
  close(): void {
    for (const entry of this.#channels.values()) this.#clock.clearTimeout(entry.idleTimer);
    for (const subscriber of this.#subscribers ?? []) subscriber?.close();
    this.#subscribers = undefined;
    this.#channels.clear();
  }
}

function hears(listener: ReleaseListener, message: string): boolean {
  return listener.id === undefined || message === listener.id;
}
