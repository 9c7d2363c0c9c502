import { validateConfigText, type ScheduleConfig } from '@tickwarden/config';
import { describe, expect, it } from 'vitest';
import { activeRun } from '../src/active-runs.ts';
import {
  escapeHtml,
  html,
  listPage,
  messagePage,
  schedulePage,
  signInPage,
  stateText,
  type PageContext,
} from '../src/console-pages.ts';
import type { ScheduleDetail, ScheduleSummary } from '../src/schedule-status.ts';

const TEAMS = `team: ops
schedules:
  - name: nightly
    cron: "0 3 * * *"
    timezone: Europe/Berlin
    handler: { kind: command, argv: ["true"] }
  - name: hourly
    cron: "0 * * * *"
    handler: { kind: command, argv: ["true"] }
    paused: true
`;

function schedules(): ScheduleConfig[] {
  const result = validateConfigText(TEAMS, 'ops.yaml');
  if (!result.ok) throw new Error(JSON.stringify(result.errors));
  const billing = validateConfigText(TEAMS.replace('team: ops', 'team: billing'), 'billing.yaml');
  if (!billing.ok) throw new Error(JSON.stringify(billing.errors));
  return [...result.config.schedules, ...billing.config.schedules];
}

const NOW = Date.parse('2026-03-28T12:00:00Z');
const HOSTILE = '<script>alert(1)</script> "quoted" & \'single\' <img src=x onerror=alert(2)>';
const ctx = (overrides: Partial<PageContext> = {}): PageContext => ({
  replicaId: 'scheduler-0',
  writable: true,
  signedIn: false,
  path: '/console/',
  nowMs: NOW,
  ...overrides,
});

const summary = (schedule: ScheduleConfig, overrides: Partial<ScheduleSummary> = {}): ScheduleSummary => ({
  schedule,
  state: 'active',
  pause: undefined,
  next: [Date.parse('2026-03-29T01:00:00Z'), Date.parse('2026-03-30T01:00:00Z')],
  ...overrides,
});

function detail(schedule: ScheduleConfig, overrides: Partial<ScheduleDetail> = {}): ScheduleDetail {
  return {
    ...summary(schedule),
    ticks: [
      {
        tickMs: NOW - 60_000,
        outcome: 'missed',
        reason: 'no-lock-quorum',
        lagMs: 1200,
        jobId: undefined,
        replica: HOSTILE,
      },
    ],
    runs: [
      {
        tickMs: NOW - 120_000,
        jobId: 'ops/nightly@1',
        outcome: 'failed',
        attempt: 2,
        worker: 'worker-7',
        fence: 42,
        startedAtMs: NOW - 119_000,
        endedAtMs: NOW - 118_500,
        exitCode: 3,
        error: HOSTILE,
      },
    ],
    actions: [{ action: 'pause', by: HOSTILE, atMs: NOW - 30_000, note: HOSTILE, detail: undefined }],
    ...overrides,
  };
}

/** The markup without any of the hostile text's tags: what a browser would run or load. */
const tags = (page: string): string[] => [...page.matchAll(/<(script|img)\b/gi)].map((match) => match[0]);

describe('html and escaping', () => {
  it('escapes text in elements and attributes, and leaves markup made by html as is', () => {
    expect(escapeHtml(HOSTILE)).toBe(
      '&lt;script&gt;alert(1)&lt;/script&gt; &quot;quoted&quot; &amp; &#39;single&#39; &lt;img src=x onerror=alert(2)&gt;',
    );
    const inner = html`<b>${'<i>'}</b>`;
    expect(html`<p title="${'" onclick="x'}">${inner}${['a', html`<br>`, 1]}${undefined}</p>`.text).toBe(
      '<p title="&quot; onclick=&quot;x"><b>&lt;i&gt;</b>a<br>1</p>',
    );
  });
});

describe('pages', () => {
  const [nightly, hourly, billingNightly] = schedules() as [ScheduleConfig, ScheduleConfig, ScheduleConfig];

  it('states: active, paused by whom, when and why, paused in the team file', () => {
    expect(stateText(summary(nightly))).toBe('active');
    expect(stateText(summary(nightly, { state: 'paused', pause: { by: 'alice', atMs: NOW, note: 'INC-1' } }))).toBe(
      'paused by alice at 2026-03-28T12:00:00.000Z: INC-1',
    );
    expect(stateText(summary(nightly, { state: 'paused', pause: { by: 'alice', atMs: NOW, note: '' } }))).toBe(
      'paused by alice at 2026-03-28T12:00:00.000Z',
    );
    expect(stateText(summary(hourly, { state: 'paused (config)' }))).toBe('paused (config)');
  });

  it("the list groups by team, shows next ticks in the schedule's zone, the last outcomes, and escapes what teams wrote", () => {
    const paused = summary(hourly, { state: 'paused', pause: { by: HOSTILE, atMs: NOW, note: HOSTILE } });
    const page = listPage(ctx(), {
      total: 3,
      offset: 0,
      limit: 2,
      rows: [
        { summary: summary(nightly), latest: { tick: detail(nightly).ticks[0], run: detail(nightly).runs[0] } },
        { summary: paused, latest: { tick: undefined, run: undefined } },
        { summary: summary(billingNightly), latest: { tick: undefined, run: undefined } },
      ],
    });
    expect([...page.matchAll(/<h2>([^<]+)<\/h2>/g)].map((match) => match[1])).toEqual(['ops', 'billing']);
    expect(page).toContain('<a href="/console/schedules/ops/nightly">ops/nightly</a>');
    expect(page).toContain('2026-03-29 03:00:00 GMT+2');
    expect(page).toContain('missed</span> (no-lock-quorum)');
    expect(page).toContain('failed</span>');
    expect(page).toContain(`paused by ${escapeHtml(HOSTILE)} at 2026-03-28T12:00:00.000Z: ${escapeHtml(HOSTILE)}`);
    expect(tags(page)).toEqual([]);
    expect(page).toContain('<a href="/console/?offset=2&amp;limit=2">next page</a>');
    expect(page).not.toContain('previous page');
    expect(page).not.toContain('<form');
  });

  it('a schedule page: histories escaped, the run in progress, and no form unless signed in', () => {
    const active = [
      activeRun({
        id: 'ops/nightly@manual-1',
        data: { tickMs: NOW, lease: { fence: 10 } },
        progress: { handlerStarted: true, attempt: 1, fence: 11, attemptsMade: 0 },
        processedBy: 'worker-7',
        processedOn: NOW,
        attemptsMade: 0,
      }),
    ];
    const page = schedulePage(ctx({ path: '/console/schedules/ops/nightly' }), detail(nightly), active, 20);
    expect(tags(page)).toEqual([]);
    expect(page).toContain(`<td>${escapeHtml(HOSTILE)}</td>`);
    expect(page).toContain(
      '<td class="mono">ops/nightly@manual-1</td><td class="num">2026-03-28T12:00:00.000Z</td><td>worker-7</td><td class="num">11</td><td class="num">1</td>',
    );
    expect(page).toContain('<td class="num">1200 ms late</td>');
    expect(page).toContain('<td>exit 3</td>');
    expect(page).not.toContain('<form');
    expect(page).toContain(
      'read-only until you <a href="/console/sign-in?next=%2Fconsole%2Fschedules%2Fops%2Fnightly">sign in</a>',
    );
  });

  it('signed in: pause (or resume when paused), trigger and backfill forms, with the last by filled in (escaped)', () => {
    const signedIn = ctx({ signedIn: true, by: '"><script>' });
    const page = schedulePage(signedIn, detail(nightly, { actions: [] }), [], 20);
    expect([...page.matchAll(/<form method="post" action="([^"]+)"/g)].map((match) => match[1])).toEqual([
      '/console/sign-out',
      '/console/schedules/ops/nightly/pause',
      '/console/schedules/ops/nightly/trigger',
      '/console/schedules/ops/nightly/backfill',
    ]);
    expect(page).toContain('value="&quot;&gt;&lt;script&gt;"');
    expect(tags(page)).toEqual([]);
    const paused = schedulePage(
      signedIn,
      { ...detail(nightly), state: 'paused', pause: { by: 'alice', atMs: NOW, note: '' } },
      [],
      20,
    );
    expect(paused).toContain('action="/console/schedules/ops/nightly/resume"');
    expect(paused).not.toContain('action="/console/schedules/ops/nightly/pause"');
  });

  it("a run whose handler has not started has no fence yet (no lease while its job waits); an earlier attempt's mark does not count", () => {
    const waiting = activeRun({
      id: 'j',
      data: { tickMs: NOW, lease: { fence: 10 } },
      progress: { handlerStarted: true, attempt: 1, fence: 11, attemptsMade: 0 },
      processedBy: 'w',
      processedOn: NOW,
      attemptsMade: 1,
    });
    expect(waiting).toMatchObject({ fence: undefined, attempt: undefined });
    expect(schedulePage(ctx(), detail(nightly), [waiting], 20)).toContain('<td class="num">taking the lease</td>');
    expect(
      activeRun({
        id: 'j',
        data: 'not a tick job',
        progress: 0,
        processedBy: undefined,
        processedOn: undefined,
        attemptsMade: 0,
      }),
    ).toEqual({
      jobId: 'j',
      tickMs: undefined,
      worker: undefined,
      takenAtMs: undefined,
      fence: undefined,
      attempt: undefined,
    });
  });

  it('headers say read-only without a token; the sign-in page has no form then; flashes and messages are escaped', () => {
    const readOnly = ctx({ writable: false, flash: { kind: 'error', text: HOSTILE } });
    const page = signInPage(readOnly, '/console/');
    expect(page).toContain('read-only: this replica has no control token');
    expect(page).not.toContain('<form');
    expect(page).toContain(`<p class="flash error" role="status">${escapeHtml(HOSTILE)}</p>`);
    expect(signInPage(ctx(), '/console/schedules/ops/nightly')).toContain(
      '<input type="hidden" name="next" value="/console/schedules/ops/nightly">',
    );
    expect(tags(messagePage(ctx(), 'Not found', `Nothing at /console/${HOSTILE}.`))).toEqual([]);
  });
});
