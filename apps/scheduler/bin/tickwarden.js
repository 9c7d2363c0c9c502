#!/usr/bin/env node
// `npx tickwarden ...`: runs the CLI from its TypeScript source (Node >= 22.18 strips types),
// resolving workspace packages to their sources too.
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const cli = fileURLToPath(new URL('../src/cli.ts', import.meta.url));
const result = spawnSync(process.execPath, ['--conditions=@tickwarden/source', cli, ...process.argv.slice(2)], { stdio: 'inherit' });
process.exit(result.status ?? 1);
