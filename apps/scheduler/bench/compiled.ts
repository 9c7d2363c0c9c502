/**
 * What the benchmarks run as the deployed processes: compiled JavaScript, as the image runs it
 * (deploy/docker/Dockerfile), never the TypeScript sources - those load Node's type stripper into
 * each process, 13-22 MB of RSS that a deployed replica does not have.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { stripTypeScriptTypes } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));

/** Builds the scheduler and the libs it imports (`nx run scheduler:build`: cached when nothing changed); the path of its compiled main. */
export function compiledScheduler(): string {
  execFileSync('npx', ['nx', 'run', 'scheduler:build', '--outputStyle=static'], {
    cwd: ROOT,
    stdio: ['ignore', process.stderr, process.stderr],
  });
  return path.join(ROOT, 'apps/scheduler/dist/main.js');
}

/**
 * A benchmark script that imports only npm packages, type-stripped to plain JavaScript under
 * node_modules/.cache (from there, its imports resolve to the repository's node_modules).
 */
export function strippedScript(script: string): string {
  const dir = path.join(ROOT, 'node_modules/.cache/tickwarden-bench');
  mkdirSync(dir, { recursive: true });
  const out = path.join(dir, `${path.basename(script, '.ts')}.mjs`);
  writeFileSync(out, stripTypeScriptTypes(readFileSync(script, 'utf8'), { mode: 'strip' }));
  return out;
}
