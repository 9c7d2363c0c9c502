import { spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const BIN = fileURLToPath(new URL('../bin/tickwarden.js', import.meta.url));
const ROOT = fileURLToPath(new URL('../../..', import.meta.url)).replace(/\/$/, '');
const rootPackage = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as Record<string, unknown> & {
  engines: { node: string };
};
const nvmrc = readFileSync(path.join(ROOT, '.nvmrc'), 'utf8').trim();

/**
 * Loaded before the launcher (`--import`): appends every module URL resolved, by `import` or
 * `require`, to the file named by LOADED_MODULES.
 */
const RECORD_LOADED = `data:text/javascript,${encodeURIComponent(
  [
    "import { appendFileSync } from 'node:fs';",
    "import { registerHooks } from 'node:module';",
    'registerHooks({ resolve(specifier, context, next) {',
    '  const resolved = next(specifier, context);',
    "  appendFileSync(process.env.LOADED_MODULES, resolved.url + '\\n');",
    '  return resolved;',
    '} });',
  ].join('\n'),
)}`;

describe('tickwarden launcher (bin/tickwarden.js)', () => {
  it("--help, a command's --help, --version and usage errors answer at once: nothing heavy is loaded for them", () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'tickwarden-launcher-'));
    try {
      for (const [i, args] of [
        ['--help'],
        ['status', '--help'],
        ['help', 'trigger'],
        ['--version'],
        ['frobnicate'],
        ['next'],
      ].entries()) {
        const loadedFile = path.join(dir, `loaded-${i}`);
        writeFileSync(loadedFile, '');
        const from = performance.now();
        const result = spawnSync(process.execPath, ['--import', RECORD_LOADED, BIN, ...args], {
          encoding: 'utf8',
          env: { ...process.env, LOADED_MODULES: loadedFile },
        });
        const ms = performance.now() - from;
        expect(result.status, `${args.join(' ')}: ${result.stderr}`).toBe(
          args[0] === 'frobnicate' || args[0] === 'next' ? 2 : 0,
        );
        // What made a command slow to start was its modules (the config's parser, ioredis, BullMQ,
        // the logger): none may load to answer these. Counted, not timed: a loaded machine slows
        // any start alike (the contracts' zod schemas do load).
        const loaded = readFileSync(loadedFile, 'utf8').split('\n').filter(Boolean);
        expect(loaded.length, `${args.join(' ')}: nothing recorded`).toBeGreaterThan(0);
        const heavy = loaded.filter((url) =>
          /\/node_modules\/(bullmq|ioredis|pino|yaml)\/|\/libs\/(config|redlock|runtime)\//.test(url),
        );
        expect(heavy, args.join(' ')).toEqual([]);
        // The bound only catches a hang: the suites run beside this one slow any start alike.
        expect(ms, args.join(' ')).toBeLessThan(10_000);
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

/**
 * A Node older than the repository needs, as a new user on Debian 12 has (`apt-get install nodejs`:
 * Node 20). CI runs on the same kind of machine (.ci/run installs Node 24 beside the system's).
 */
function findOldNode(): string {
  const pathDirs = (process.env['PATH'] ?? '').split(path.delimiter).filter(Boolean);
  const candidates = [
    ...new Set(['/usr/bin/node', '/usr/local/bin/node', ...pathDirs.map((dir) => path.join(dir, 'node'))]),
  ].filter((candidate) => existsSync(candidate));
  const tried: string[] = [];
  for (const candidate of candidates) {
    const version = spawnSync(candidate, ['--version'], { encoding: 'utf8' }).stdout?.trim() ?? '';
    tried.push(`${candidate} ${version || '(no version)'}`);
    if (Number(/^v(\d+)\./.exec(version)?.[1] ?? Infinity) < 22) return candidate;
  }
  throw new Error(
    `these tests need a Node.js older than 22 (Debian 12's /usr/bin/node is 20: apt-get install nodejs); found only: ${tried.join(', ') || 'none'}`,
  );
}

describe('on a Node.js older than the repository needs', () => {
  let oldNode: string;
  let oldVersion: string;
  /** PATH with the old Node (and its npm) first, as the user's shell has it. */
  let oldPath: string;
  let project: string;

  /** What the guard says, in whichever directory is the repository's root. */
  const expectGuardMessage = (output: string, root: string) => {
    expect(output).toContain(
      `tickwarden needs Node.js ${rootPackage.engines.node} (package.json "engines"; .nvmrc: ${nvmrc}), but this is Node.js ${oldVersion} (`,
    );
    expect(output).toContain('nvm install && nvm use');
    expect(output).toContain(`npm install --no-save --no-package-lock --prefix ${root}/.tools node@${nvmrc}`);
    expect(output).toContain(`export PATH="${root}/.tools/node_modules/.bin:$PATH"`);
    expect(output).not.toContain('ERR_UNKNOWN_FILE_EXTENSION');
  };
  const run = (command: string, args: string[], cwd: string) => {
    // Without the npm_* variables of an npm that runs this test (`npm test`): the user's shell has none.
    const env = Object.fromEntries(Object.entries(process.env).filter(([name]) => !/^npm_/i.test(name)));
    const result = spawnSync(command, args, {
      cwd,
      encoding: 'utf8',
      timeout: 20_000,
      env: { ...env, PATH: oldPath, npm_config_update_notifier: 'false' },
    });
    return { code: result.status, output: `${result.stdout}${result.stderr}` };
  };

  beforeAll(() => {
    oldNode = findOldNode();
    oldVersion = spawnSync(oldNode, ['--version'], { encoding: 'utf8' }).stdout.trim();
    oldPath = [path.dirname(oldNode), process.env['PATH'] ?? ''].join(path.delimiter);
    // `npm ci` in the repository itself would replace its node_modules (npm runs the root's
    // preinstall after installing): a copy of what the guard and npm read instead, with the root
    // package.json's engines and scripts, no dependencies.
    project = mkdtempSync(path.join(tmpdir(), 'tickwarden-old-node-'));
    const { name, version, engines, scripts } = rootPackage;
    writeFileSync(
      path.join(project, 'package.json'),
      JSON.stringify({ name, version, private: true, engines, scripts }, null, 2),
    );
    writeFileSync(
      path.join(project, 'package-lock.json'),
      JSON.stringify(
        { name, version, lockfileVersion: 3, requires: true, packages: { '': { name, version, engines } } },
        null,
        2,
      ),
    );
    mkdirSync(path.join(project, 'scripts'));
    for (const file of ['.nvmrc', '.npmrc', 'scripts/check-node.cjs'])
      copyFileSync(path.join(ROOT, file), path.join(project, file));
  });
  afterAll(() => rmSync(project, { recursive: true, force: true }));

  it('the bin (npx tickwarden) says which Node.js is needed and how to get it: exit 2', () => {
    for (const args of [['status'], ['--help']]) {
      const result = spawnSync(oldNode, [BIN, ...args], { encoding: 'utf8' });
      expect(result.status).toBe(2);
      expect(result.stdout).toBe('');
      expectGuardMessage(result.stderr, ROOT);
    }
    const npx = run('npx', ['tickwarden', 'status'], ROOT);
    expect(npx.code).toBe(2);
    expectGuardMessage(npx.output, ROOT);
  });

  it('npm start in the repository says it before running anything', () => {
    const start = run('npm', ['start'], ROOT);
    expect(start.code).not.toBe(0);
    expectGuardMessage(start.output, ROOT);
  });

  it("npm ci, npm start and npm test (the root package.json's scripts) say it", () => {
    for (const command of [['ci', '--no-audit', '--no-fund', '--offline'], ['start'], ['test']]) {
      const result = run('npm', command, project);
      expect(result.code, `npm ${command.join(' ')}: ${result.output}`).not.toBe(0);
      expectGuardMessage(result.output, project);
    }
  });
});
