import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { waitUntil } from '../src/index.ts';
import { alive } from './alive.ts';

describe('reaper', () => {
  it('kills the Redis servers and removes the data of a test process that was SIGKILLed', async () => {
    const script = fileURLToPath(new URL('./fixtures/start-and-hang.ts', import.meta.url));
    const child = spawn(process.execPath, ['--conditions=@tickwarden/source', script], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout.on('data', (chunk) => (out += String(chunk)));
    await waitUntil(() => out.includes('\n'), 'the fixture to report its nodes', { timeoutMs: 20_000 });
    const started = JSON.parse(out.split('\n')[0] ?? '{}') as { pids: number[]; dirs: string[] };
    expect(started.pids.length).toBe(2);
    expect(started.pids.every(alive)).toBe(true);
    child.kill('SIGKILL');
    await waitUntil(() => !started.pids.some(alive), 'the reaper to kill the orphaned redis-servers', {
      timeoutMs: 10_000,
    });
    await waitUntil(() => !started.dirs.some((dir) => existsSync(dir)), 'the reaper to remove their data');
  });
});
