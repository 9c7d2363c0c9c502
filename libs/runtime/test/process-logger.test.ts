import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

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
