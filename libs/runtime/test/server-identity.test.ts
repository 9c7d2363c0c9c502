import { startRedisNodes, type RedisNodes } from '@tickwarden/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkServerIdentities, sameServers } from '../src/index.ts';

describe('sameServers', () => {
  it('groups the names whose servers report one run_id; servers that did not answer are left out', () => {
    const runIds = new Map([
      ['lock 1', 'a'],
      ['lock 2', 'b'],
      ['lock 3', 'a'],
      ['queue', 'b'],
      ['lock 4', undefined],
      ['lock 5', undefined],
    ]);
    expect(sameServers(runIds)).toEqual([
      ['lock 1', 'lock 3'],
      ['lock 2', 'queue'],
    ]);
    expect(
      sameServers(
        new Map([
          ['lock 1', 'a'],
          ['lock 2', 'b'],
        ]),
      ),
    ).toEqual([]);
  });
});

describe('checkServerIdentities, against real redis-servers', () => {
  let nodes: RedisNodes;
  beforeAll(async () => {
    nodes = await startRedisNodes({ count: 2, aof: false, password: 'p@ss/word' });
  });
  afterAll(() => nodes.close());

  it('names one server reached by two routes (its port and a proxy), without its password; independent servers pass; one that does not answer is unchecked', async () => {
    const [a, b] = nodes.urls as [string, string];
    const proxied = (await nodes.link('identity')).urls[0] as string;
    const { problems, unchecked } = await checkServerIdentities(
      [
        { name: 'TICKWARDEN_LOCK_NODES entry 1', url: a },
        { name: 'TICKWARDEN_LOCK_NODES entry 2', url: b },
        { name: 'TICKWARDEN_QUEUE_REDIS', url: proxied },
        { name: 'TICKWARDEN_LOCK_NODES entry 3', url: 'redis://127.0.0.1:1' },
      ],
      undefined,
      500,
    );
    expect(problems).toHaveLength(1);
    expect(problems[0]).toMatch(
      /^TICKWARDEN_LOCK_NODES entry 1 \(redis:\/\/:\*\*\*@127\.0\.0\.1:\d+\) and TICKWARDEN_QUEUE_REDIS \(redis:\/\/:\*\*\*@127\.0\.0\.1:\d+\) are one Redis server \(run_id \w{40}\)/,
    );
    expect(problems[0]).not.toContain('p@ss');
    expect(unchecked).toEqual(['TICKWARDEN_LOCK_NODES entry 3']);
    expect(
      (
        await checkServerIdentities(
          [
            { name: 'x', url: a },
            { name: 'y', url: b },
          ],
          undefined,
        )
      ).problems,
    ).toEqual([]);
  });
});
