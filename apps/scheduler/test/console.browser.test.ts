import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  freePort,
  startAppProcess,
  startRedisNodes,
  waitUntil,
  type AppProcessOptions,
  type AppProcessRole,
  type ManagedProcess,
  type RedisNodes,
} from '@tickwarden/testkit';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const SCHEDULER = fileURLToPath(new URL('../src/main.ts', import.meta.url));
const WORKER = fileURLToPath(new URL('../../worker/src/main.ts', import.meta.url));
/** Debian's chromium (`.ci/run` installs it): Playwright drives it as it is, no browser download. */
const CHROMIUM = '/usr/bin/chromium';
/** `TICKWARDEN_CONSOLE_SCREENSHOT=docs/console.png` (from the repository root): where the schedule page's screenshot goes (the README's). */
const SCREENSHOT_PATH = process.env['TICKWARDEN_CONSOLE_SCREENSHOT'];
const SCREENSHOT = SCREENSHOT_PATH
  ? path.resolve(fileURLToPath(new URL('../../../', import.meta.url)), SCREENSHOT_PATH)
  : undefined;

/** One schedule, never due while the test runs (03:00 in Berlin): every run is one the test triggers, and lasts long enough to be seen running. */
const CONFIG = `team: ops
schedules:
  - name: nightly-report
    cron: "0 3 * * *"
    timezone: Europe/Berlin
    handler: { kind: command, argv: ["sleep", "2"] }
    leaseTtl: 10s
`;
const SCHEDULE = 'ops/nightly-report';
const NOTE = 'INC-42 <script>alert("x")</script> & more';

describe('the web console in a real browser, on real replicas and a real worker', () => {
  let locks: RedisNodes;
  let queue: RedisNodes;
  let dir: string;
  let browser: Browser;
  const processes: ManagedProcess[] = [];
  const token = randomBytes(24).toString('hex');
  let writable: string;
  let readOnly: string;

  async function start(
    role: AppProcessRole,
    name: string,
    main: string,
    options: Pick<AppProcessOptions, 'configDir' | 'replicaId' | 'env'>,
  ): Promise<string> {
    const port = await freePort();
    const child = startAppProcess({
      role,
      name,
      main,
      configDir: dir,
      lockNodes: locks.urls,
      queueRedis: queue.urls[0],
      httpPort: port,
      logLevel: 'info',
      ...options,
    });
    processes.push(child);
    const started = `${role} started`;
    await child.waitForLine((line) => line.includes(`"msg":"${started}"`), started, 30_000);
    return `http://127.0.0.1:${port}`;
  }

  beforeAll(async () => {
    // Not a skip: CI installs chromium, and a machine without it must say what is missing.
    if (!existsSync(CHROMIUM))
      throw new Error(
        `the console's browser test drives Debian's chromium at ${CHROMIUM}, which is missing: apt-get install chromium (.ci/run installs it)`,
      );
    [locks, queue] = await Promise.all([
      startRedisNodes({ count: 3, aof: false }),
      startRedisNodes({ count: 1, aof: false }),
    ]);
    dir = mkdtempSync(path.join(tmpdir(), 'tickwarden-console-'));
    mkdirSync(path.join(dir, 'teams'));
    writeFileSync(path.join(dir, 'teams', 'ops.yaml'), CONFIG);
    const tokenFile = path.join(dir, 'control-token');
    writeFileSync(tokenFile, `${token}\n`, { mode: 0o600 });
    const teams = path.join(dir, 'teams');
    [writable, readOnly] = await Promise.all([
      start('scheduler', 'console-rw', SCHEDULER, {
        configDir: teams,
        replicaId: 'scheduler-a',
        env: { TICKWARDEN_CONTROL_TOKEN_FILE: tokenFile },
      }),
      start('scheduler', 'console-ro', SCHEDULER, { configDir: teams, replicaId: 'scheduler-b' }),
      start('worker', 'worker', WORKER, { configDir: teams }),
    ]);
    browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox'] });
  });

  afterAll(async () => {
    await browser?.close();
    await Promise.all(processes.map((child) => child.stop('SIGKILL')));
    await Promise.all([locks?.close(), queue?.close()]);
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  let page: Page;
  const schedulePage = () => `${writable}/console/schedules/${SCHEDULE}`;

  it('read-only until signed in: the list and the schedule page show state and next ticks, and no form', async () => {
    page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    page.setDefaultTimeout(10_000);
    const response = await page.goto(`${writable}/console/`);
    expect(response?.status()).toBe(200);
    const headers = response?.headers() ?? {};
    expect(headers['content-type']).toBe('text/html; charset=utf-8');
    expect(headers['content-security-policy']).toContain("default-src 'none'");
    expect(headers['x-frame-options']).toBe('DENY');
    const row = page.locator('tr', { has: page.locator(`a[href="/console/schedules/${SCHEDULE}"]`) });
    await expect.poll(() => row.locator('td').nth(3).textContent()).toBe('active');
    // Next ticks at 03:00 in Berlin, in Berlin's zone (CET or CEST).
    expect(await row.locator('td').nth(4).textContent()).toMatch(/^(\d{4}-\d\d-\d\d 03:00:00 GMT\+[12]){3}$/);
    expect(await page.locator('form').count()).toBe(0);
    await row.locator('a').click();
    await expect.poll(() => page.locator('h1').textContent()).toBe(SCHEDULE);
    expect(await page.locator('form').count()).toBe(0);
    expect(await page.locator('header').textContent()).toContain('read-only until you sign in');
  });

  it('a wrong token is refused; the control token signs the browser in, and the forms appear', async () => {
    await page.click('text=sign in');
    await page.fill('input[name=token]', 'not-the-control-token');
    await page.click('button:has-text("Sign in")');
    expect(await page.locator('.flash.error').textContent()).toBe('That is not the control token.');
    await page.fill('input[name=token]', token);
    await page.click('button:has-text("Sign in")');
    await expect.poll(() => page.url()).toBe(schedulePage());
    const cookies = await page.context().cookies();
    const session = cookies.find((cookie) => cookie.name === 'tickwarden-session');
    expect(session).toMatchObject({ httpOnly: true, sameSite: 'Strict', path: '/' });
    expect(session?.value).not.toContain(token);
    expect(await page.locator('form[action$="/pause"]').count()).toBe(1);
    expect(await page.locator('form[action$="/trigger"]').count()).toBe(1);
    expect(await page.locator('form[action$="/backfill"]').count()).toBe(1);
  });

  it('pause with a note (shown as text, not run as a script), then resume', async () => {
    const pause = page.locator('form[action$="/pause"]');
    await pause.locator('input[name=by]').fill('alice');
    await pause.locator('input[name=note]').fill(NOTE);
    await pause.locator('button').click();
    await expect.poll(() => page.locator('.flash').textContent()).toBe(`${SCHEDULE} paused by alice`);
    const state = await page.locator('dl.facts dd').first().textContent();
    expect(state).toMatch(/^paused by alice at \d{4}-\d\d-\d\dT[\d:.]+Z: /);
    expect(state).toContain(NOTE);
    expect(await page.locator('script').count()).toBe(0);
    expect(await page.locator('#audit tbody tr').first().textContent()).toContain(NOTE);
    // The JSON API of the other replica sees the same pause: it is the cluster's, in the queue Redis.
    expect(await (await fetch(`${readOnly}/api/schedules/${SCHEDULE}`)).json()).toMatchObject({
      state: 'paused',
      pause: { by: 'alice', note: NOTE },
    });
    const resume = page.locator('form[action$="/resume"]');
    // The browser's last `by` is filled in again.
    expect(await resume.locator('input[name=by]').inputValue()).toBe('alice');
    await resume.locator('input[name=note]').fill('patched');
    await resume.locator('button').click();
    await expect.poll(() => page.locator('.flash').textContent()).toBe(`${SCHEDULE} resumed by alice`);
    expect(await page.locator('dl.facts dd').first().textContent()).toBe('active');
  });

  it('trigger: the triggered tick appears, the run in progress with its lease holder and fence (from its time), then the run, succeeded', async () => {
    const trigger = page.locator('form[action$="/trigger"]');
    await trigger.locator('input[name=note]').fill('rerun after INC-42');
    await trigger.locator('button').click();
    const flash = (await page.locator('.flash').textContent()) ?? '';
    const [, jobId, atMs] = /^ops\/nightly-report triggered: job (\S+@manual-(\d+))$/.exec(flash) ?? [];
    expect(jobId).toMatch(/^ops\/nightly-report@manual-\d+$/);
    const tick = page.locator('#ticks tbody tr').first();
    expect(await tick.locator('td').nth(1).textContent()).toBe('triggered');
    expect(await tick.locator('td').nth(4).textContent()).toBe(jobId);
    // Reloads until `check` holds of the page (a bounded wait: the worker takes the job within a second or so).
    const reloadUntil = (check: () => Promise<boolean>, what: string) =>
      waitUntil(async () => (await page.reload()) !== null && check(), what, { timeoutMs: 20_000, intervalMs: 200 });
    const running = page.locator('#running tbody tr').first();
    await reloadUntil(
      async () => (await running.count()) === 1 && (await running.locator('td').nth(4).textContent()) === '1',
      "the run's handler to start",
    );
    expect(await running.locator('td').first().textContent()).toBe(jobId);
    const [holder, heldFence] = await Promise.all([
      running.locator('td').nth(2).textContent(),
      running.locator('td').nth(3).textContent(),
    ]);
    // A trigger is its own tick: the run's fence starts at the trigger's time, in microseconds.
    expect(Number(heldFence)).toBe(Number(atMs) * 1000);
    const run = page.locator('#runs tbody tr').first();
    await reloadUntil(
      async () => (await run.count()) === 1 && (await run.locator('td').nth(1).textContent()) === 'succeeded',
      'the triggered run to succeed',
    );
    expect(await run.locator('td').allTextContents()).toEqual([
      expect.any(String),
      'succeeded',
      '1',
      holder,
      heldFence,
      expect.stringMatching(/^\d+ ms$/),
      'exit 0',
      '-',
      expect.any(String),
    ]);
    // The run's record can be written before BullMQ moves its job out of active: reloaded until it is out.
    await reloadUntil(async () => (await page.locator('#running tbody tr').count()) === 0, 'the job to leave active');
    expect(await page.locator('#audit tbody tr').first().textContent()).toContain('rerun after INC-42');
    if (SCREENSHOT) await page.screenshot({ path: SCREENSHOT, fullPage: true });
  });

  it('backfill: a range in the future is refused with its reason; a dry run lists what it would fire', async () => {
    const backfill = page.locator('form[action$="/backfill"]');
    const minute = (ms: number) => new Date(ms).toISOString().slice(0, 16);
    await backfill.locator('input[name=from]').fill(minute(Date.now() - 3_600_000));
    await backfill.locator('input[name=to]').fill(minute(Date.now() + 3_600_000));
    await backfill.locator('input[name=by]').fill('alice');
    await backfill.locator('button').click();
    expect(await page.locator('.flash.error').textContent()).toMatch(/^backfill not done: .* ends in the future/);
    const again = page.locator('form[action$="/backfill"]');
    await again.locator('input[name=from]').fill(minute(Date.now() - 3 * 86_400_000));
    await again.locator('input[name=to]').fill(minute(Date.now() - 60_000));
    await again.locator('button').click();
    expect(await page.locator('.flash.done').textContent()).toMatch(/^dry run: \d+ would fire, \d+ skipped$/);
    expect(await page.locator('#backfill-report tbody tr').count()).toBeGreaterThanOrEqual(2);
  });

  it('refuses what it must: a POST without a token configured, without a session, from another site, too large; bad paths and fields', async () => {
    const post = (base: string, target: string, body: string, headers: Record<string, string> = {}) =>
      fetch(`${base}${target}`, {
        method: 'POST',
        body,
        redirect: 'manual',
        headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
      });
    const action = `/console/schedules/${SCHEDULE}/pause`;
    const noToken = await post(readOnly, action, 'by=mallory&note=x');
    expect(noToken.status).toBe(403);
    expect(await noToken.text()).toContain('the console is read-only');
    expect((await post(readOnly, '/console/sign-in', `token=${token}`)).status).toBe(403);
    expect(await (await fetch(`${readOnly}/console/sign-in`)).text()).toContain('This replica has no control token');
    const noSession = await post(writable, action, 'by=mallory&note=x');
    expect(noSession.status).toBe(403);
    expect(await noSession.text()).toContain('need a browser signed in');
    const session =
      (await page.context().cookies()).find((cookie) => cookie.name === 'tickwarden-session')?.value ?? '';
    const cookie = `tickwarden-session=${session}`;
    expect((await post(writable, action, 'by=mallory', { cookie, origin: 'https://evil.example' })).status).toBe(403);
    // Sign-in sends the browser back to a console page only, never to another site.
    const away = await post(
      writable,
      '/console/sign-in',
      `token=${token}&next=${encodeURIComponent('//evil.example/console/')}`,
    );
    expect([away.status, away.headers.get('location')]).toEqual([303, '/console/']);
    expect((await post(writable, action, `by=mallory&note=${'x'.repeat(20_000)}`, { cookie })).status).toBe(413);
    const noBy = await post(writable, action, 'by=&note=x', { cookie });
    expect(noBy.status).toBe(400);
    expect(await noBy.text()).toContain('pause not done: by: required');
    const missing = await fetch(`${writable}/console/schedules/ops/nope`);
    expect([missing.status, missing.headers.get('content-type')]).toEqual([404, 'text/html; charset=utf-8']);
    expect((await fetch(`${writable}/console/nowhere`)).status).toBe(404);
    expect((await fetch(`${writable}/console/schedules/${SCHEDULE}?count=0`)).status).toBe(400);
    expect((await fetch(`${writable}/console/`, { method: 'DELETE' })).status).toBe(405);
    // Nothing above paused it.
    expect(await (await fetch(`${writable}/api/schedules/${SCHEDULE}`)).json()).toMatchObject({ state: 'active' });
  });
});
