import { describe, expect, it } from 'vitest';
import { QuorumUnavailableError, resourceKeys, type Redlock } from '../src/index.ts';
import { connectedRedlockOn, inspect, onEveryNode, redlockOn, sleep, useNodes } from './support.ts';

const DAY_MS = 86_400_000;

/** A Redlock on a link that blackholes some nodes, once the others answered (a probe waits out the silent ones). */
async function partitioned(urls: readonly string[]): Promise<Redlock> {
  const redlock = redlockOn(urls, { nodeTimeoutMs: 100 });
  await redlock.probe({ nodeTimeoutMs: 500 });
  return redlock;
}

describe('marks: a value that only rises, on a quorum of the lock nodes', () => {
  const cluster = useNodes(5);

  it('a raise takes only a higher value, with its tag; a read gives the mark as it stands', async () => {
    const redlock = await connectedRedlockOn(cluster.nodes.urls);
    expect(await redlock.readMark('mark-rises')).toBeUndefined();
    expect(await redlock.raiseMark('mark-rises', { value: 1_000, tag: 'epoch-a' }, DAY_MS)).toBe(true);
    // A lower value leaves the mark; the raise still says a quorum holds at least it.
    expect(await redlock.raiseMark('mark-rises', { value: 900, tag: 'epoch-b' }, DAY_MS)).toBe(true);
    expect(await redlock.readMark('mark-rises')).toEqual({ value: 1_000, tag: 'epoch-a' });
    expect(await redlock.raiseMark('mark-rises', { value: 2_000, tag: 'epoch-b' }, DAY_MS)).toBe(true);
    expect(await redlock.readMark('mark-rises')).toEqual({ value: 2_000, tag: 'epoch-b' });
  });

  it('a read takes the highest of a quorum: nodes that lost the mark, or missed the last raise, do not lower it', async () => {
    const redlock = await connectedRedlockOn(cluster.nodes.urls);
    await redlock.raiseMark('mark-quorum', { value: 5_000, tag: 'a' }, DAY_MS);
    const key = resourceKeys('tickwarden', 'mark-quorum').mark;
    await onEveryNode(cluster.nodes.urls, (client) => client.get(key), '5000|a');
    // Two nodes lost it (restarted empty).
    await Promise.all(cluster.nodes.urls.slice(0, 2).map((url) => inspect(url, (client) => client.del(key))));
    expect(await redlock.readMark('mark-quorum')).toEqual({ value: 5_000, tag: 'a' });
    // A raise that reached nodes 0-2 only, read by a client that reaches nodes 2-4 only: node 2 has it.
    const writerLink = await cluster.nodes.link('mark-writer');
    writerLink.partition([3, 4]);
    const writer = await partitioned(writerLink.urls);
    expect(await writer.raiseMark('mark-quorum', { value: 6_000, tag: 'b' }, DAY_MS)).toBe(true);
    const readerLink = await cluster.nodes.link('mark-reader');
    readerLink.partition([0, 1]);
    const reader = await partitioned(readerLink.urls);
    expect(await reader.readMark('mark-quorum')).toEqual({ value: 6_000, tag: 'b' });
  });

  it('without a quorum a read throws and a raise says it did not hold; the mark expires after it last rose', async () => {
    const link = await cluster.nodes.link('mark-cut');
    link.partition([0, 1, 2]);
    const cut = await partitioned(link.urls);
    expect(await cut.raiseMark('mark-cut', { value: 1, tag: 'a' }, DAY_MS)).toBe(false);
    await expect(cut.readMark('mark-cut')).rejects.toBeInstanceOf(QuorumUnavailableError);
    const redlock = await connectedRedlockOn(cluster.nodes.urls);
    await redlock.raiseMark('mark-kept', { value: 7, tag: 'a' }, 300);
    expect(await redlock.readMark('mark-kept')).toEqual({ value: 7, tag: 'a' });
    await sleep(500);
    expect(await redlock.readMark('mark-kept')).toBeUndefined();
  });

  it('refuses a value that is not an integer and a tag with "|"', async () => {
    const redlock = await connectedRedlockOn(cluster.nodes.urls);
    await expect(redlock.raiseMark('mark-bad', { value: 1.5, tag: 'a' }, DAY_MS)).rejects.toThrow(/integer/);
    await expect(redlock.raiseMark('mark-bad', { value: 1, tag: 'a|b' }, DAY_MS)).rejects.toThrow(/"\|"/);
  });
});
