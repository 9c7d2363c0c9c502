import type { NodeSubscriber } from './lock-node.ts';
import { NodeConnection, type NodeAddress } from './node-connection.ts';
import { commandText } from './resp-text.ts';

/** A channel this subscriber keeps: whether the node confirmed it on this connection, and who waits for that. */
interface Subscription {
  confirmed: boolean;
  waiting: { resolve: (value: unknown) => void; reject: (error: Error) => void }[];
}

/**
 * A node's release notifications (ReleaseNotifier) on a connection of its own, in subscriber
 * mode. A subscription waits for a connection however long it takes (its caller bounds the
 * wait), and every channel is subscribed again on each new connection; messages published while
 * it was away are lost, which costs a waiter one retry delay.
 */
export class SocketSubscriber implements NodeSubscriber {
  readonly #connection: NodeConnection;
  readonly #onMessage: (channel: string, message: string) => void;
  readonly #channels = new Map<string, Subscription>();

  constructor(address: NodeAddress, onMessage: (channel: string, message: string) => void) {
    this.#onMessage = onMessage;
    this.#connection = new NodeConnection(address, {
      reply: (reply) => this.#push(reply),
      ready: () => {
        if (this.#channels.size > 0) this.#connection.write(commandText(['subscribe', ...this.#channels.keys()]));
      },
      lost: () => {
        for (const subscription of this.#channels.values()) subscription.confirmed = false;
      },
    });
  }

  /** Resolves once the node confirmed the subscription. */
  subscribe(channel: string): Promise<unknown> {
    return new Promise((resolve, reject) => {
      const known = this.#channels.get(channel);
      if (known?.confirmed) return resolve(undefined);
      if (known) return void known.waiting.push({ resolve, reject });
      this.#channels.set(channel, { confirmed: false, waiting: [{ resolve, reject }] });
      if (this.#connection.state === 'ready') this.#connection.write(commandText(['subscribe', channel]));
    });
  }

  unsubscribe(channel: string): void {
    const subscription = this.#channels.get(channel);
    if (!subscription) return;
    this.#channels.delete(channel);
    for (const { reject } of subscription.waiting) reject(new Error('unsubscribed'));
    if (this.#connection.state === 'ready') this.#connection.write(commandText(['unsubscribe', channel]));
  }

  close(): void {
    this.#connection.close();
    for (const { waiting } of this.#channels.values()) for (const { reject } of waiting) reject(new Error('closed'));
    this.#channels.clear();
  }

  /** A subscriber's replies are pushes: `message` (channel, message), `subscribe` and `unsubscribe` (channel, count). */
  #push(reply: unknown): void {
    if (!Array.isArray(reply)) return;
    const [kind, channel, body] = reply as [unknown, unknown, unknown];
    if (kind === 'message') this.#onMessage(String(channel), String(body));
    else if (kind === 'subscribe') {
      const subscription = this.#channels.get(String(channel));
      if (!subscription) return;
      subscription.confirmed = true;
      for (const { resolve } of subscription.waiting.splice(0)) resolve(undefined);
    }
  }
}
