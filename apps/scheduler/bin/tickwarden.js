#!/usr/bin/env node
// `npx tickwarden ...`: runs the CLI (src/cli.ts) from its TypeScript source in this process,
// resolving workspace packages to their sources too (the `@tickwarden/source` condition, added by
// a resolve hook: no second Node process, so `--help` answers in a few tens of milliseconds).
// Written for old Node versions too (no top-level await, `?.` or `??`): on a Node older than the
// repository needs, it says which one and how to get it (scripts/check-node.cjs) instead of
// failing in the type stripper with ERR_UNKNOWN_FILE_EXTENSION.
import { existsSync } from 'node:fs';
import * as nodeModule from 'node:module';
import { fileURLToPath } from 'node:url';

// Absent only where the sources run without the repository around them (the container image,
// whose Node the image pins).
const guard = fileURLToPath(new URL('../../../scripts/check-node.cjs', import.meta.url));
const problem = existsSync(guard)
  ? nodeModule
      .createRequire(import.meta.url)(guard)
      .nodeProblem()
  : undefined;
if (problem) {
  process.stderr.write(problem);
  process.exit(2);
}

nodeModule.registerHooks({
  resolve(specifier, context, nextResolve) {
    return nextResolve(
      specifier,
      Object.assign({}, context, { conditions: context.conditions.concat('@tickwarden/source') }),
    );
  },
});
import('../src/cli.ts').catch((error) => {
  process.stderr.write(`tickwarden: ${error && error.stack ? error.stack : String(error)}\n`);
  process.exitCode = 1;
});
