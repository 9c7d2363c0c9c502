import { spawn, spawnSync } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { LogSink } from '../src/log-sink.ts';

const root = fileURLToPath(new URL('../../..', import.meta.url));

describe('processLogger', () => {
  it('a burst of lines longer than one write reaches stdout whole and in order, even when the process exits at once', () => {
    const script = [
      "import { processLogger } from '@tickwarden/runtime';",
      "const logger = processLogger('info', { replica: 'r1' });",
      "for (let i = 0; i < 5000; i++) logger.info({ i, text: 'x'.repeat(i % 300) }, 'line');",
      "logger.debug('below the level');",
      'process.exit(3);',
    ].join('\n');
    const child = spawnSync(
      process.execPath,
      ['--conditions=@tickwarden/source', '--input-type=module', '-e', script],
      { cwd: root, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 },
    );
    expect(child.status).toBe(3);
    const lines = child.stdout.split('\n').filter((line) => line !== '');
    expect(lines).toHaveLength(5000);
    const records = lines.map((line) => JSON.parse(line) as { i: number; replica: string; msg: string });
    expect(records.map((record) => record.i)).toEqual(Array.from({ length: 5000 }, (_, i) => i));
    expect(records.every((record) => record.replica === 'r1' && record.msg === 'line')).toBe(true);
  });
});

describe('LogSink', () => {
  it('a burst queued while the event loop is busy goes out in a few big writes, whole and in order', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'tickwarden-log-sink-'));
    const file = path.join(dir, 'log');
    const fd = openSync(file, 'w');
    try {
      const sink = new LogSink(fd);
      const lines = Array.from({ length: 50_000 }, (_, i) => `{"i":${i},"text":"${'x'.repeat(i % 100)}"}\n`);
      for (const line of lines) sink.write(line);
      const expected = lines.join('');
      // Each turn of the loop busy for 2 ms: a stream that writes a few KB per completed write needs
      // one turn for every few of its writes, hundreds here.
      let turns = 0;
      while (readFileSync(file, 'utf8').length < expected.length && turns < 1_000) {
        const until = performance.now() + 2;
        while (performance.now() < until);
        await new Promise((resolve) => setTimeout(resolve, 1));
        turns++;
      }
      expect(readFileSync(file, 'utf8')).toBe(expected);
      expect(turns).toBeLessThan(50);
    } finally {
      closeSync(fd);
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('a reader slow to read does not hold up the event loop; one gone (EPIPE) does not stop the process', async () => {
    const script = [
      "import { processLogger } from '@tickwarden/runtime';",
      "const logger = processLogger('info', { replica: 'r1' });",
      'let longest = 0;',
      'let last = performance.now();',
      'const watch = setInterval(() => { const now = performance.now(); longest = Math.max(longest, now - last); last = now; }, 1);',
      "for (let round = 0; round < 20; round++) { for (let i = 0; i < 2000; i++) logger.info({ round, i, text: 'y'.repeat(200) }, 'line'); await new Promise((r) => setTimeout(r, 50)); }",
      'clearInterval(watch);',
      'process.stderr.write(`longest ${Math.round(longest)}\\n`);',
    ].join('\n');
    const run = async (reader: 'slow' | 'gone'): Promise<{ code: number | null; stderr: string; lines: number }> => {
      const child = spawn(process.execPath, ['--conditions=@tickwarden/source', '--input-type=module', '-e', script], {
        cwd: root,
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let stderr = '';
      let stdout = '';
      child.stderr.on('data', (data: Buffer) => (stderr += data.toString()));
      if (reader === 'gone') child.stdout.destroy();
      else {
        // Nothing read for the first second: the pipe fills and its writes wait.
        child.stdout.pause();
        setTimeout(() => child.stdout.on('data', (data: Buffer) => (stdout += data.toString())).resume(), 1_000);
      }
      const code = await new Promise<number | null>((resolve) => child.once('close', resolve));
      return { code, stderr, lines: stdout.split('\n').filter((line) => line !== '').length };
    };
    const slow = await run('slow');
    expect(slow.code).toBe(0);
    expect(slow.lines).toBe(40_000);
    expect(Number(/longest (\d+)/.exec(slow.stderr)?.[1])).toBeLessThan(500);
    const gone = await run('gone');
    expect(gone.code).toBe(0);
    expect(gone.stderr).toMatch(/^longest \d+\n$/);
  }, 60_000);

  it('a reader that stops reading costs dropped lines, not memory: counted, and told once the queue drained', async () => {
    const sink = new URL('../src/log-sink.ts', import.meta.url).href;
    const script = [
      `import { LogSink } from '${sink}';`,
      'const out = new LogSink(1, { maxQueuedUnits: 50_000 });',
      "for (let i = 0; i < 5000; i++) out.write(`${JSON.stringify({ i, text: 'z'.repeat(80) })}\\n`);",
      'await new Promise((resolve) => setTimeout(resolve, 2_000));',
    ].join('\n');
    const child = spawn(process.execPath, ['--input-type=module', '-e', script], {
      cwd: root,
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let stdout = '';
    // Nothing read for the first second: the pipe fills, the queue reaches its bound.
    child.stdout.pause();
    setTimeout(() => child.stdout.on('data', (data: Buffer) => (stdout += data.toString())).resume(), 1_000);
    expect(await new Promise<number | null>((resolve) => child.once('close', resolve))).toBe(0);
    const records = stdout
      .split('\n')
      .filter((line) => line !== '')
      .map((line) => JSON.parse(line) as { i?: number; dropped?: number; msg?: string; level?: number });
    const written = records.filter((record) => record.i !== undefined).map((record) => record.i as number);
    const told = records.filter((record) => record.dropped !== undefined);
    expect(told).toEqual([
      {
        level: 40,
        time: expect.any(Number),
        dropped: 5000 - written.length,
        msg: 'log lines dropped: stdout was not read fast enough',
      },
    ]);
    expect(written.length).toBeGreaterThan(0);
    expect(written.length).toBeLessThan(5000);
    // The lines that were kept are the first ones, in order.
    expect(written).toEqual(Array.from({ length: written.length }, (_, i) => i));
  }, 30_000);
});
