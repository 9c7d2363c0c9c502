import { describe, expect, it } from 'vitest';
import { scripts } from '../src/index.ts';
import { inspect, useNodes } from './support.ts';

describe('Lua scripts', () => {
  const cluster = useNodes(1);

  it.each(Object.values(scripts).map((script) => [script.name, script] as const))(
    '%s.lua: the SHA matches SCRIPT LOAD on a real server',
    async (_name, script) => {
      const sha = await inspect(cluster.nodes.urls[0] ?? '', (client) => client.script('LOAD', script.source));
      expect(sha).toBe(script.sha);
    },
  );

  it('each script has a header naming KEYS, ARGV and its return codes', () => {
    for (const script of Object.values(scripts)) {
      const header = script.source.slice(0, script.source.indexOf(']]'));
      expect(header).toMatch(/KEYS/);
      expect(header).toMatch(/ARGV/);
      expect(header).toMatch(/Returns/);
    }
  });

  it('a call for many resources replies with one code when every resource gets it, else one entry each', async () => {
    await inspect(cluster.nodes.urls[0] ?? '', async (c) => {
      await c.script('LOAD', scripts.acquire.source);
      const bases = ['{reply-a}:', '{reply-b}:'];
      // A plain call: ttl, wait, fence retention, inbox; per resource: value, proposal, ticket.
      const acquire = (value: string, proposal: string) =>
        c.evalsha(scripts.acquire.sha, 2, ...bases, '5000', '0', '60000', '', value, proposal, '', value, proposal, '');
      expect(await acquire('first', '10')).toBe(1);
      await c.del('{reply-b}:lock');
      expect(await acquire('second', '20')).toEqual([0, 1]);
    });
  });
});
