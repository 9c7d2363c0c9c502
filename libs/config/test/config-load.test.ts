import { mkdir, rm, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  formatConfigError,
  loadConfig,
  loadConfigOffThread,
  parseHttpDestinations,
  validateConfigText,
  type ConfigResult,
  type ScheduleConfig,
} from '../src/index.ts';
import { configOf, minimalSchedule, tempDir, yaml } from './support.ts';

describe('valid configurations', () => {
  it('applies every default', () => {
    const config = configOf(
      validateConfigText(
        yaml('team: payments', 'schedules:', ...minimalSchedule('nightly-report')),
        'teams/payments.yaml',
      ),
    );
    expect(config.files).toEqual(['teams/payments.yaml']);
    expect(config.schedules).toStrictEqual([
      {
        id: 'payments/nightly-report',
        team: 'payments',
        name: 'nightly-report',
        cron: '0 2 * * *',
        timezone: 'UTC',
        handler: { kind: 'module', path: './jobs/report.js', exportName: 'default', killGraceMs: 10_000 },
        payload: null,
        overlap: 'skip',
        leaseTtlMs: 30_000,
        maxRuntimeMs: undefined,
        startDeadlineMs: undefined,
        catchUpMs: 0,
        jitterMs: 0,
        attempts: 1,
        backoff: { type: 'fixed', delayMs: 0 },
        paused: false,
        history: { keep: 20, maxAgeMs: 7 * 86_400_000 },
        queue: 'default',
        source: { file: 'teams/payments.yaml', line: 3 },
      } satisfies ScheduleConfig,
    ]);
  });

  it('applies the defaults of each handler kind', () => {
    const text = yaml(
      'team: payments',
      'schedules:',
      '  - { name: a, cron: "0 * * * *", handler: { kind: http, url: "https://example.com/hook" } }',
      '  - { name: b, cron: "0 * * * *", handler: { kind: command, argv: [./run.sh] } }',
      '  - { name: c, cron: "0 * * * *", handler: { kind: module, path: ./c.js } }',
    );
    const handlers = configOf(validateConfigText(text, 'p.yaml')).schedules.map((schedule) => schedule.handler);
    expect(handlers).toStrictEqual([
      {
        kind: 'http',
        url: 'https://example.com/hook',
        method: 'POST',
        headers: {},
        timeoutMs: 30_000,
        redirects: 'none',
      },
      { kind: 'command', argv: ['./run.sh'], cwd: undefined, env: {}, killGraceMs: 10_000 },
      { kind: 'module', path: './c.js', exportName: 'default', killGraceMs: 10_000 },
    ]);
  });

  it('reads every field, durations in milliseconds', () => {
    const text = yaml(
      'team: payments',
      'schedules:',
      '  - name: nightly-report',
      '    cron: "0 2 * * *"',
      '    timezone: Europe/Berlin',
      '    handler:',
      '      kind: http',
      '      url: https://example.com/hook',
      '      method: PUT',
      '      redirects: same-origin',
      '      headers: { X-Team: payments, "X-Count": "3", X-Token: { secret: payments-api, key: token } }',
      '      timeout: 1m30s',
      '    payload: { report: daily, limits: [1, 2.5, null, true], nested: { a: "b" } }',
      '    overlap: cancel-previous',
      '    leaseTtl: 45s',
      '    maxRuntime: 10m',
      '    startDeadline: 1m',
      '    catchUp: 2h',
      '    jitter: 1.5s',
      '    attempts: 3',
      '    backoff: { type: exponential, delay: 1s }',
      '    paused: true',
      '    history: { keep: 200, maxAge: 30d }',
      '    queue: reports-eu',
      '  - name: cleanup',
      '    cron: "30 4 * * SUN"',
      '    handler: { kind: command, argv: [node, cleanup.js, --dry-run], cwd: /srv/jobs, env: { MODE: fast }, killGrace: 0s }',
      '  - name: digest',
      '    cron: "@daily"',
      '    handler: { kind: module, path: ./jobs/digest.js, export: sendDigest, killGrace: 5s }',
    );
    const [report, cleanup, digest] = configOf(validateConfigText(text, 'teams/payments.yaml')).schedules;
    expect(report).toStrictEqual({
      id: 'payments/nightly-report',
      team: 'payments',
      name: 'nightly-report',
      cron: '0 2 * * *',
      timezone: 'Europe/Berlin',
      handler: {
        kind: 'http',
        url: 'https://example.com/hook',
        method: 'PUT',
        headers: { 'X-Team': 'payments', 'X-Count': '3', 'X-Token': { secret: 'payments-api', key: 'token' } },
        timeoutMs: 90_000,
        redirects: 'same-origin',
      },
      payload: { report: 'daily', limits: [1, 2.5, null, true], nested: { a: 'b' } },
      overlap: 'cancel-previous',
      leaseTtlMs: 45_000,
      maxRuntimeMs: 600_000,
      startDeadlineMs: 60_000,
      catchUpMs: 7_200_000,
      jitterMs: 1_500,
      attempts: 3,
      backoff: { type: 'exponential', delayMs: 1_000 },
      paused: true,
      history: { keep: 200, maxAgeMs: 30 * 86_400_000 },
      queue: 'reports-eu',
      source: { file: 'teams/payments.yaml', line: 3 },
    } satisfies ScheduleConfig);
    expect(cleanup?.handler).toStrictEqual({
      kind: 'command',
      argv: ['node', 'cleanup.js', '--dry-run'],
      cwd: '/srv/jobs',
      env: { MODE: 'fast' },
      killGraceMs: 0,
    });
    expect(cleanup?.source.line).toBe(25);
    expect(digest?.handler).toStrictEqual({
      kind: 'module',
      path: './jobs/digest.js',
      exportName: 'sendDigest',
      killGraceMs: 5_000,
    });
    expect(digest?.cron).toBe('@daily');
  });

  it('accepts a 6-field cron expression (seconds first) and an empty schedule list', () => {
    const seconds = yaml(
      'team: payments',
      'schedules:',
      '  - name: every-5s',
      '    cron: "*/5 * * * * *"',
      '    handler: { kind: module, path: ./x.js }',
    );
    expect(configOf(validateConfigText(seconds, 'p.yaml')).schedules[0]?.cron).toBe('*/5 * * * * *');
    expect(configOf(validateConfigText(yaml('team: payments', 'schedules: []'), 'p.yaml')).schedules).toEqual([]);
  });

  it('sets source.line to the line of each schedule item, whatever comes before it', () => {
    const text = yaml(
      '# payments team',
      'team: payments',
      '',
      'schedules:',
      '  # the nightly one',
      '  - name: a',
      '    cron: "0 2 * * *"',
      '    handler: { kind: module, path: ./a.js }',
      '',
      '  - { name: b, cron: "0 3 * * *", handler: { kind: module, path: ./b.js } }',
      '  -',
      '    name: c',
      '    cron: "0 4 * * *"',
      '    handler: { kind: module, path: ./c.js }',
    );
    const lines = configOf(validateConfigText(text, 'p.yaml')).schedules.map((schedule) => [
      schedule.name,
      schedule.source.line,
    ]);
    expect(lines).toEqual([
      ['a', 6],
      ['b', 10],
      ['c', 12],
    ]);
  });

  it('supports anchors and << merge keys for shared settings', () => {
    const text = yaml(
      'team: payments',
      'schedules:',
      '  - &hourly',
      '    name: a',
      '    cron: "0 * * * *"',
      '    handler: { kind: module, path: ./a.js }',
      '    attempts: 3',
      '  - <<: *hourly',
      '    name: b',
      '    attempts: 5',
    );
    const schedules = configOf(validateConfigText(text, 'p.yaml')).schedules;
    // source.line is where the schedule's mapping starts: its first key, after the `- &hourly` line
    expect(schedules.map((schedule) => [schedule.id, schedule.cron, schedule.attempts, schedule.source.line])).toEqual([
      ['payments/a', '0 * * * *', 3, 4],
      ['payments/b', '0 * * * *', 5, 8],
    ]);
  });
});

// Both loaders, the same answers: the replicas load off their event loop, the CLI in it.
describe.each([
  ['loadConfig', loadConfig],
  ['loadConfigOffThread', loadConfigOffThread],
])('%s', (_name, loadConfig) => {
  let dir: string;
  let remove: () => Promise<void>;
  beforeEach(async () => {
    ({ dir, remove } = await tempDir());
  });
  afterEach(async () => {
    await remove();
  });

  const team = (name: string, ...schedules: string[]): string =>
    yaml(`team: ${name}`, 'schedules:', ...schedules.flatMap(minimalSchedule));

  it('merges a directory of team files, in name order, ignoring dotfiles, other files and directories', async () => {
    await writeFile(join(dir, 'payments.yaml'), team('payments', 'nightly-report', 'hourly-sync'));
    await writeFile(join(dir, 'billing.yml'), team('billing', 'invoices'));
    await writeFile(join(dir, 'payments-extra.yaml'), team('payments', 'weekly'));
    await writeFile(join(dir, '.hidden.yaml'), 'not: [valid');
    await writeFile(join(dir, 'README.md'), '# not config');
    await mkdir(join(dir, 'nested.yaml'));
    await writeFile(join(dir, 'nested.yaml', 'inner.yaml'), 'not: [valid');

    const config = configOf(await loadConfig(dir));
    expect(config.files).toEqual([
      join(dir, 'billing.yml'),
      join(dir, 'payments-extra.yaml'),
      join(dir, 'payments.yaml'),
    ]);
    expect(config.schedules.map((schedule) => schedule.id)).toEqual([
      'billing/invoices',
      'payments/weekly',
      'payments/nightly-report',
      'payments/hourly-sync',
    ]);
    expect(config.schedules[3]?.source).toEqual({ file: join(dir, 'payments.yaml'), line: 8 });
  });

  it('reads a Kubernetes ConfigMap volume: the symlinked files, not the ..data directories', async () => {
    const generation = join(dir, '..2024_05_01_12_00_00.123456789');
    await mkdir(generation);
    await writeFile(join(generation, 'payments.yaml'), team('payments', 'nightly-report'));
    await writeFile(join(generation, 'billing.yaml'), team('billing', 'invoices'));
    await symlink('..2024_05_01_12_00_00.123456789', join(dir, '..data'));
    await symlink('..data/payments.yaml', join(dir, 'payments.yaml'));
    await symlink('..data/billing.yaml', join(dir, 'billing.yaml'));

    const config = configOf(await loadConfig(dir));
    expect(config.files).toEqual([join(dir, 'billing.yaml'), join(dir, 'payments.yaml')]);
    expect(config.schedules.map((schedule) => schedule.id)).toEqual(['billing/invoices', 'payments/nightly-report']);
  });

  it('loads a single file', async () => {
    const file = join(dir, 'payments.conf');
    await writeFile(file, team('payments', 'nightly-report'));
    expect(configOf(await loadConfig(file)).schedules.map((schedule) => schedule.source)).toEqual([{ file, line: 3 }]);
  });

  it('reports every error of every file, a duplicate across files with both places', async () => {
    await writeFile(join(dir, 'a.yaml'), team('payments', 'nightly-report'));
    await writeFile(
      join(dir, 'b.yaml'),
      yaml('team: payments', 'schedules:', ...minimalSchedule('nightly-report'), '    attempts: 0'),
    );
    await writeFile(join(dir, 'c.yaml'), yaml('team: billing', 'schedules: [', ''));
    const result = await loadConfig(dir);
    expect(result.ok).toBe(false);
    expect(result.ok ? [] : result.errors.map(formatConfigError)).toEqual([
      `${join(dir, 'b.yaml')}:3:11: schedules[0].name: duplicate schedule "payments/nightly-report": defined in ${join(dir, 'a.yaml')}:3 and in ${join(dir, 'b.yaml')}:3; team/name must be unique across all files`,
      `${join(dir, 'b.yaml')}:8:15: schedules[0].attempts: expected an integer of at least 1, got the number 0`,
      `${join(dir, 'c.yaml')}:4:1: YAML syntax error: Flow sequence in block collection must be sufficiently indented and end with a ]`,
    ]);
  });

  it('with an http destination policy, an http schedule whose URL it refuses is an error naming file, schedule line and field', async () => {
    const file = join(dir, 'payments.yaml');
    const http = (name: string, url: string) =>
      `  - { name: ${name}, cron: "0 * * * *", handler: { kind: http, url: "${url}" } }`;
    await writeFile(
      file,
      yaml(
        'team: payments',
        'schedules:',
        ...minimalSchedule('report'),
        http('ok', 'https://api.corp.example/hook'),
        http('metadata', 'http://169.254.169.254/latest/'),
        http('elsewhere', 'https://example.org/'),
      ),
    );
    const policy = parseHttpDestinations('*.corp.example', undefined).value;
    const result = await loadConfig(file, { httpDestinations: policy });
    expect(result.ok ? [] : result.errors.map(formatConfigError)).toEqual([
      `${file}:9:1: schedules[2].handler.url: destination refused: address 169.254.169.254 is link-local (cloud metadata lives there): always denied`,
      `${file}:10:1: schedules[3].handler.url: destination refused: host example.org is not in TICKWARDEN_HTTP_ALLOW`,
    ]);
    // Without a policy (the CLI's validate with no variables set, unit tests), nothing is refused.
    expect((await loadConfig(file)).ok).toBe(true);
  });

  it('reports the same errors for a file as validateConfigText', async () => {
    const text = yaml(
      'team: payments',
      'schedules:',
      '  - name: x',
      '    cron: "* * *"',
      '    handler: { kind: http }',
    );
    const file = join(dir, 'payments.yaml');
    await writeFile(file, text);
    expect(await loadConfig(file)).toEqual(validateConfigText(text, file));
  });

  it('reports a missing path, an empty directory and a dangling symlink', async () => {
    const missing = join(dir, 'nope');
    expect(await loadConfig(missing)).toEqual({
      ok: false,
      errors: [
        {
          file: missing,
          line: 1,
          column: 1,
          path: [],
          message: 'cannot read the configuration: no such file or directory',
        },
      ],
    });
    expect(await loadConfig(dir)).toEqual({
      ok: false,
      errors: [{ file: dir, line: 1, column: 1, path: [], message: 'no *.yaml or *.yml files in this directory' }],
    });

    await writeFile(join(dir, 'a.yaml'), team('payments', 'nightly-report'));
    await symlink('..data/gone.yaml', join(dir, 'gone.yaml'));
    const result = await loadConfig(dir);
    expect(result.ok ? [] : result.errors.map(formatConfigError)).toEqual([
      `${join(dir, 'gone.yaml')}:1:1: cannot read the file: no such file or directory`,
    ]);
  });
});

describe('loadConfigOffThread with many schedules', () => {
  /** The longest the event loop went without running a 1 ms timer while `work` ran, ms. */
  async function longestStall(work: () => Promise<unknown>): Promise<number> {
    let last = performance.now();
    let longest = 0;
    const timer = setInterval(() => {
      const now = performance.now();
      longest = Math.max(longest, now - last);
      last = now;
    }, 1);
    await work();
    clearInterval(timer);
    return Math.max(longest, performance.now() - last);
  }

  it('gives the same result as loadConfig, and leaves the event loop free while it parses', async () => {
    const { dir, remove } = await tempDir();
    try {
      for (let file = 0; file < 3; file++) {
        const names = Array.from({ length: 5_000 }, (_, i) => `s${i}`);
        await writeFile(
          join(dir, `team-${file}.yaml`),
          yaml(`team: team-${file}`, 'schedules:', ...names.flatMap(minimalSchedule)),
        );
      }
      let inThread: unknown;
      let offThread: unknown;
      const inThreadStall = await longestStall(async () => (inThread = await loadConfig(dir)));
      const offThreadStall = await longestStall(async () => (offThread = await loadConfigOffThread(dir)));
      expect(configOf(offThread as ConfigResult).schedules).toHaveLength(15_000);
      expect(offThread).toEqual(inThread);
      // Off the thread the schedules arrive as JSON; their repeated parts are shared again (SharedParts).
      const [first, last] = [
        configOf(offThread as ConfigResult).schedules[0],
        configOf(offThread as ConfigResult).schedules[14_999],
      ];
      expect(last?.backoff).toBe(first?.backoff);
      expect(last?.history).toBe(first?.history);
      // In the caller's thread the whole parse is one stall; off it, only each file's checks arriving
      // (compared with each other: under a loaded CI both stalls grow).
      expect(inThreadStall).toBeGreaterThan(3 * offThreadStall);
    } finally {
      await remove();
    }
  });
});

describe('loadConfigOffThread given the previous config', () => {
  const team = (name: string, ...schedules: string[]): string =>
    yaml(`team: ${name}`, 'schedules:', ...schedules.flatMap(minimalSchedule));

  it("keeps the schedules of unchanged files as the previous config's objects, and reads the changed ones anew", async () => {
    const { dir, remove } = await tempDir();
    try {
      await writeFile(join(dir, 'billing.yaml'), team('billing', 'invoices', 'dunning'));
      await writeFile(join(dir, 'payments.yaml'), team('payments', 'nightly', 'hourly'));
      await writeFile(join(dir, 'reporting.yaml'), team('reporting', 'weekly'));
      const first = configOf(await loadConfigOffThread(dir));
      const byId = (config: { schedules: ScheduleConfig[] }, id: string) =>
        config.schedules.find((schedule) => schedule.id === id);

      // One team edits its file (a schedule's cron); another adds a comment; the third is untouched.
      await writeFile(
        join(dir, 'payments.yaml'),
        team('payments', 'nightly', 'hourly').replace('cron: "0 2 * * *"', 'cron: "0 3 * * *"'),
      );
      await writeFile(join(dir, 'reporting.yaml'), `${team('reporting', 'weekly')}# owned by reporting\n`);
      const second = configOf(await loadConfigOffThread(dir, { previous: first }));
      expect(second).toEqual(configOf(await loadConfig(dir)));
      expect(byId(second, 'billing/invoices')).toBe(byId(first, 'billing/invoices'));
      expect(byId(second, 'billing/dunning')).toBe(byId(first, 'billing/dunning'));
      expect(byId(second, 'payments/nightly')).not.toBe(byId(first, 'payments/nightly'));
      expect(byId(second, 'payments/nightly')?.cron).toBe('0 3 * * *');
      expect(byId(second, 'reporting/weekly')).not.toBe(byId(first, 'reporting/weekly'));
      expect(second.schedules.map((schedule) => schedule.id)).toEqual(first.schedules.map((schedule) => schedule.id));

      // A new file that defines an id an unchanged file defines: the errors of a load from scratch.
      await writeFile(join(dir, 'billing-copy.yaml'), team('billing', 'refunds', 'invoices'));
      const third = await loadConfigOffThread(dir, { previous: second });
      expect(third.ok ? [] : third.errors.map(formatConfigError)).toEqual([
        expect.stringContaining('duplicate schedule "billing/invoices"'),
      ]);
      expect(third).toEqual(await loadConfig(dir));
      // ... also when the unchanged file comes later: the error stands at its definition.
      await writeFile(join(dir, 'aaa.yaml'), team('reporting', 'weekly'));
      await writeFile(join(dir, 'billing-copy.yaml'), team('billing', 'refunds'));
      const later = await loadConfigOffThread(dir, { previous: second });
      expect(later.ok ? [] : later.errors.map(formatConfigError)).toEqual([
        expect.stringMatching(/reporting\.yaml:\d+:\d+: .*duplicate schedule "reporting\/weekly"/),
      ]);
      expect(later).toEqual(await loadConfig(dir));
      await rm(join(dir, 'aaa.yaml'));
      await writeFile(join(dir, 'billing-copy.yaml'), team('billing', 'refunds'));
      const fourth = configOf(await loadConfigOffThread(dir, { previous: second }));
      expect(fourth).toEqual(configOf(await loadConfig(dir)));
      expect(byId(fourth, 'billing/invoices')).toBe(byId(first, 'billing/invoices'));
      expect(byId(fourth, 'billing/refunds')).toBeDefined();
    } finally {
      await remove();
    }
  });
});
