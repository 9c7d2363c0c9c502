import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { formatConfigError, validateConfigTexts, type ConfigResult, type ConfigText } from '../src/index.ts';

/** Joins lines into a YAML document (a trailing newline included), so line numbers are easy to read off. */
export const yaml = (...lines: string[]): string => `${lines.join('\n')}\n`;

/** The formatted errors of a set of files; fails the test when the configuration is valid. */
export function errorsOf(files: readonly ConfigText[]): string[] {
  const result = validateConfigTexts(files);
  if (result.ok) throw new Error('expected the configuration to be invalid');
  return result.errors.map(formatConfigError);
}

export function configOf(result: ConfigResult): Extract<ConfigResult, { ok: true }>['config'] {
  if (!result.ok)
    throw new Error(`expected a valid configuration, got:\n${result.errors.map(formatConfigError).join('\n')}`);
  return result.config;
}

/** A fresh temporary directory, removed by the returned function. */
export async function tempDir(): Promise<{ dir: string; remove: () => Promise<void> }> {
  const dir = await mkdtemp(join(tmpdir(), 'tickwarden-config-'));
  return { dir, remove: () => rm(dir, { recursive: true, force: true }) };
}

/** The smallest valid schedule, as YAML list-item lines (indented for `schedules:`). */
export const minimalSchedule = (name: string): string[] => [
  `  - name: ${name}`,
  '    cron: "0 2 * * *"',
  '    handler:',
  '      kind: module',
  '      path: ./jobs/report.js',
];
