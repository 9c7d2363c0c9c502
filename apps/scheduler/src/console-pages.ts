// The console's pages: plain HTML with inline CSS, no script. Pure functions of what they show.
// Everything interpolated is escaped unless it is markup made here (the `html` tag): team files,
// notes, names and errors are untrusted text.
import { queueName } from '@tickwarden/contracts';
import type { RunRecord } from '@tickwarden/runtime';
import type { ActiveRun } from './active-runs.ts';
import { BACKFILL_MAX_LIMIT, DEFAULT_BACKFILL_MAX } from './backfill-plan.ts';
import type { BackfillReport } from './control-actions.ts';
import { MAX_BY_CHARS, MAX_NOTE_CHARS } from './console-forms.ts';
import { inZone } from './in-zone.ts';
import type { ControlAction, TickRecord } from './ports.ts';
import { MAX_COUNT, type LatestRecords, type ScheduleDetail, type ScheduleSummary } from './schedule-status.ts';

/** Where the console lives on the replica's HTTP port. */
export const CONSOLE_PATH = '/console/';

/** Markup made by `html`: interpolated as is. Anything else interpolated is text, and escaped. */
export class Html {
  readonly text: string;
  constructor(text: string) {
    this.text = text;
  }
}

type Part = Html | string | number | undefined | readonly Part[];

const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

/** Text as HTML, safe in an element and in a quoted attribute. */
export const escapeHtml = (text: string): string => text.replace(/[&<>"']/g, (char) => ESCAPES[char] ?? char);

const partText = (part: Part): string => {
  if (part instanceof Html) return part.text;
  if (Array.isArray(part)) return part.map(partText).join('');
  return part === undefined ? '' : escapeHtml(String(part));
};

/** A template of markup: its values are escaped, except markup (Html) and lists of parts. */
export function html(strings: TemplateStringsArray, ...values: Part[]): Html {
  return new Html(
    strings.reduce((out, string, i) => out + string + (i < values.length ? partText(values[i]) : ''), ''),
  );
}

/** What every page shows besides its content. */
export interface PageContext {
  replicaId: string;
  /** A control token is configured: the console can write once signed in. */
  writable: boolean;
  signedIn: boolean;
  /** The path of this page, where sign-in comes back to. */
  path: string;
  nowMs: number;
  /** What the last action did, or why it was not done. */
  flash?: Flash | undefined;
  /** The `by` of this browser's last action, filled in again. */
  by?: string | undefined;
}

export interface Flash {
  kind: 'done' | 'error';
  text: string;
}

const CSS = `
*{box-sizing:border-box}
body{margin:0;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1f2328;background:#f6f8fa}
header{display:flex;gap:16px;align-items:center;padding:10px 24px;background:#24292f;color:#f6f8fa}
header a{color:#f6f8fa}
header .brand{font-weight:600;font-size:16px;text-decoration:none}
header .mode{margin-left:auto}
header form{display:inline}
main{padding:16px 24px;max-width:1400px}
h1{font-size:20px;margin:8px 0 12px}
h2{font-size:16px;margin:20px 0 8px}
h3{font-size:14px;margin:0 0 8px}
table{border-collapse:collapse;width:100%;background:#fff;border:1px solid #d0d7de}
th,td{text-align:left;padding:5px 8px;border-bottom:1px solid #eaeef2;vertical-align:top}
th{background:#f6f8fa;font-weight:600;white-space:nowrap}
.num{font-variant-numeric:tabular-nums;white-space:nowrap}
code,.mono{font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-size:12.5px}
.muted{color:#656d76}
.flash{padding:8px 24px;margin:0;font-weight:500}
.flash.done{background:#dafbe1;color:#116329}
.flash.error{background:#ffebe9;color:#a40e26}
.state-active{color:#116329}
.state-paused{color:#9a6700;font-weight:500}
.outcome-bad{color:#a40e26}
.outcome-good{color:#116329}
dl.facts{display:grid;grid-template-columns:max-content 1fr;gap:4px 16px;margin:0 0 8px}
dl.facts dt{color:#656d76}
dl.facts dd{margin:0}
.forms{display:grid;grid-template-columns:repeat(auto-fit,minmax(300px,1fr));gap:12px;align-items:start}
.forms form{background:#fff;border:1px solid #d0d7de;border-radius:6px;padding:12px}
label{display:block;margin:0 0 6px}
label input[type=text],label input[type=password],label input[type=datetime-local],label input[type=number]{display:block;width:100%;padding:4px 6px;font:inherit}
button{font:inherit;padding:4px 12px;cursor:pointer}
nav.pages{margin:12px 0;display:flex;gap:12px}
`;

function layout(ctx: PageContext, title: string, content: Html): string {
  const signIn = html`<a href="${CONSOLE_PATH}sign-in?next=${encodeURIComponent(ctx.path)}">sign in</a>`;
  const mode = !ctx.writable
    ? html`read-only: this replica has no control token`
    : ctx.signedIn
      ? html`signed in <form method="post" action="${CONSOLE_PATH}sign-out"><button type="submit">Sign out</button></form>`
      : html`read-only until you ${signIn}`;
  const flash = ctx.flash ? html`<p class="flash ${ctx.flash.kind}" role="status">${ctx.flash.text}</p>` : '';
  return `<!doctype html>\n${
    html`<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>${title} - Tickwarden</title><style>${new Html(CSS)}</style></head>
<body><header><a class="brand" href="${CONSOLE_PATH}">Tickwarden</a><span>replica <span class="mono">${ctx.replicaId}</span></span><span class="mode">${mode}</span></header>
${flash}<main>${content}</main></body></html>
`.text
  }`;
}

const iso = (ms: number): string => new Date(ms).toISOString();
const schedulePath = (id: string): string => `${CONSOLE_PATH}schedules/${id}`;
const dash = (value: string | number | undefined): string | number => value ?? '-';

/** A schedule's state as one line: active, paused by whom, when and why, or paused in its team file. */
export function stateText({ state, pause }: Pick<ScheduleSummary, 'state' | 'pause'>): string {
  if (state === 'paused (config)') return 'paused (config)';
  if (state === 'paused' && pause)
    return `paused by ${pause.by} at ${iso(pause.atMs)}${pause.note ? `: ${pause.note}` : ''}`;
  return state;
}

const stateCell = (summary: ScheduleSummary): Html =>
  html`<span class="${summary.state === 'active' ? 'state-active' : 'state-paused'}">${stateText(summary)}</span>`;

const BAD_OUTCOMES = /^(missed|failed|aborted|worker-lost)/;
const outcomeCell = (outcome: string): Html =>
  html`<span class="${BAD_OUTCOMES.test(outcome) ? 'outcome-bad' : outcome === 'succeeded' ? 'outcome-good' : ''}">${outcome}</span>`;

const nextTicks = ({ schedule, next }: ScheduleSummary): Html =>
  next.length === 0
    ? html`<span class="muted">none planned yet</span>`
    : html`${next.map((tick, i) => html`${i > 0 ? html`<br>` : ''}${inZone(tick, schedule.timezone)}`)}`;

const lastTick = (tick: TickRecord | undefined): Html =>
  tick
    ? html`${outcomeCell(tick.outcome)}${tick.reason ? ` (${tick.reason})` : ''}<br><span class="muted num">${iso(tick.tickMs)}</span>`
    : html`<span class="muted">none</span>`;
const lastRun = (run: RunRecord | undefined): Html =>
  run
    ? html`${outcomeCell(run.outcome)}<br><span class="muted num">${iso(run.endedAtMs)}</span>`
    : html`<span class="muted">none</span>`;

/** One page of the schedule list. */
export interface ListPage {
  total: number;
  offset: number;
  limit: number;
  rows: { summary: ScheduleSummary; latest: LatestRecords }[];
}

/** A table of `rows`, each a list of cells, under `headings`. */
function table(headings: readonly string[], rows: readonly Html[][]): Html {
  return html`<table><thead><tr>${headings.map((heading) => html`<th>${heading}</th>`)}</tr></thead><tbody>${rows.map((cells) => html`<tr>${cells}</tr>`)}</tbody></table>`;
}

/** A cell; `num` keeps a number or a time on one line, `mono` sets ids and patterns apart. */
const td = (content: Part, kind?: 'num' | 'mono' | 'mono num'): Html =>
  kind ? html`<td class="${kind}">${content}</td>` : html`<td>${content}</td>`;

/** Every schedule of a page, grouped by team: state, next ticks in the schedule's zone, what its last tick and run became. */
export function listPage(ctx: PageContext, page: ListPage): string {
  const { total, offset, limit, rows } = page;
  const teams = Map.groupBy(rows, (row) => row.summary.schedule.team);
  const headings = ['schedule', 'cron', 'time zone', 'state', 'next ticks', 'last tick', 'last run'];
  const sections = [...teams].map(([team, members]) => {
    const cells = members.map(({ summary, latest }) => {
      const { id, cron, timezone } = summary.schedule;
      return [
        td(html`<a href="${schedulePath(id)}">${id}</a>`),
        td(cron, 'mono num'),
        td(timezone),
        td(stateCell(summary)),
        td(nextTicks(summary), 'num'),
        td(lastTick(latest.tick)),
        td(lastRun(latest.run)),
      ];
    });
    return html`<section><h2>${team}</h2>${table(headings, cells)}</section>`;
  });
  const shown = rows.length === 0 ? 'none' : `${offset + 1}-${offset + rows.length}`;
  const link = (from: number, label: string) =>
    html`<a href="${CONSOLE_PATH}?offset=${from}&amp;limit=${limit}">${label}</a>`;
  const pager = html`<nav class="pages">${offset > 0 ? link(Math.max(0, offset - limit), 'previous page') : ''}${offset + limit < total ? link(offset + limit, 'next page') : ''}</nav>`;
  return layout(
    ctx,
    'Schedules',
    html`<h1>Schedules</h1><p class="muted">${shown} of ${total} schedules on this replica, at ${iso(ctx.nowMs)}</p>${sections}${pager}`,
  );
}

const lag = (lagMs: number): string => (lagMs < 0 ? `${-lagMs} ms ahead` : `${lagMs} ms late`);

/** Why a tick ended as it did; for ticks missed while no replica ran, how many from when. */
function tickReason({ gap, reason }: TickRecord): string | number {
  if (!gap) return dash(reason);
  return `${gap.atLeast ? 'at least ' : ''}${gap.count} ticks from ${iso(gap.firstTickMs)}${reason ? `: ${reason}` : ''}`;
}

function tickTable(ticks: readonly TickRecord[]): Html {
  if (ticks.length === 0) return html`<p class="muted">No tick recorded yet.</p>`;
  return table(
    ['tick (UTC)', 'outcome', 'reason', 'lag', 'job', 'by replica'],
    ticks.map((tick) => [
      td(iso(tick.tickMs), 'num'),
      td(outcomeCell(tick.outcome)),
      td(tickReason(tick)),
      td(lag(tick.lagMs), 'num'),
      td(dash(tick.jobId), 'mono'),
      td(tick.replica),
    ]),
  );
}

const runResult = (run: RunRecord): string =>
  [run.exitCode === undefined ? '' : `exit ${run.exitCode}`, run.status === undefined ? '' : `HTTP ${run.status}`]
    .filter(Boolean)
    .join(', ') || '-';

function runTable(runs: readonly RunRecord[]): Html {
  if (runs.length === 0) return html`<p class="muted">No run ended yet.</p>`;
  return table(
    ['tick (UTC)', 'outcome', 'attempt', 'worker', 'fence', 'duration', 'exit / HTTP', 'error', 'ended (UTC)'],
    runs.map((run) => [
      td(iso(run.tickMs), 'num'),
      td(outcomeCell(run.outcome)),
      td(dash(run.attempt), 'num'),
      td(dash(run.worker)),
      td(dash(run.fence), 'num'),
      td(`${run.endedAtMs - run.startedAtMs} ms`, 'num'),
      td(runResult(run)),
      td(dash(run.error)),
      td(iso(run.endedAtMs), 'num'),
    ]),
  );
}

function auditTable(actions: readonly ControlAction[]): Html {
  if (actions.length === 0) return html`<p class="muted">No control action yet.</p>`;
  return table(
    ['when (UTC)', 'action', 'by', 'note', 'detail'],
    actions.map((action) => [
      td(iso(action.atMs), 'num'),
      td(action.action),
      td(action.by),
      td(action.note || '-'),
      td(dash(action.detail)),
    ]),
  );
}

function activeTable(queue: string, active: readonly ActiveRun[]): Html {
  if (active.length === 0)
    return html`<p class="muted">No run in progress (no active job of this schedule in queue <span class="mono">${queueName(queue)}</span>).</p>`;
  const time = (ms: number | undefined) => (ms === undefined ? '-' : iso(ms));
  return table(
    ['job', 'tick (UTC)', 'lease holder (worker)', 'fencing token', 'attempt', 'taken (UTC)'],
    active.map((run) => [
      td(run.jobId, 'mono'),
      td(time(run.tickMs), 'num'),
      td(dash(run.worker)),
      td(dash(run.fence), 'num'),
      td(run.attempt ?? 'taking the lease', 'num'),
      td(time(run.takenAtMs), 'num'),
    ]),
  );
}

function reportTable(report: BackfillReport): Html {
  const ticks =
    report.ticks.length === 0
      ? html`<p class="muted">The range holds no tick.</p>`
      : table(
          ['tick (UTC)', 'would', 'why'],
          report.ticks.map((tick) => [td(iso(tick.tickMs), 'num'), td(tick.action), td(tick.why)]),
        );
  return html`<section id="backfill-report"><h2>Backfill dry run: ${report.fired} would fire, ${report.skipped} skipped</h2>${ticks}</section>`;
}

/** The `by` and `note` fields every action form has. */
const saidFields = (by: string | undefined): Html =>
  html`<label>by <input type="text" name="by" required maxlength="${MAX_BY_CHARS}" value="${by ?? ''}" placeholder="who you are"></label>
<label>note <input type="text" name="note" maxlength="${MAX_NOTE_CHARS}" placeholder="why"></label>`;

/** A form that posts one action of the schedule, its own fields first. */
const actionForm = (
  summary: ScheduleSummary,
  name: string,
  title: string,
  fields: Html,
  by: string | undefined,
  button: string,
): Html =>
  html`<form method="post" action="${schedulePath(summary.schedule.id)}/${name}"><h3>${title}</h3>${fields}${saidFields(by)}<button type="submit">${button}</button></form>`;

function actionForms(ctx: PageContext, summary: ScheduleSummary): Html {
  const configPaused =
    summary.state === 'paused (config)'
      ? html`<p class="muted">Paused in its team file: only the file resumes it.</p>`
      : html``;
  const pauseOrResume =
    summary.state === 'paused'
      ? actionForm(summary, 'resume', 'Resume', html``, ctx.by, 'Resume')
      : actionForm(summary, 'pause', 'Pause', configPaused, ctx.by, 'Pause');
  const trigger = actionForm(
    summary,
    'trigger',
    'Trigger',
    html`<p class="muted">One run now, under its own claim.</p>`,
    ctx.by,
    'Trigger now',
  );
  const range = html`<label>from (UTC) <input type="datetime-local" step="1" name="from" required></label>
<label>to (UTC) <input type="datetime-local" step="1" name="to" required></label>
<label>at most this many ticks <input type="number" name="max" min="1" max="${BACKFILL_MAX_LIMIT}" value="${DEFAULT_BACKFILL_MAX}"></label>
<label><input type="checkbox" name="dryRun" checked> dry run: list what would fire, fire nothing</label>`;
  const backfill = actionForm(summary, 'backfill', 'Backfill', range, ctx.by, 'Backfill');
  return html`<section id="actions"><h2>Act</h2><div class="forms">${pauseOrResume}${trigger}${backfill}</div></section>`;
}

/** One schedule: state, next ticks, the runs in progress, the forms (signed in), and its tick, run and audit histories. */
export function schedulePage(
  ctx: PageContext,
  detail: ScheduleDetail,
  active: readonly ActiveRun[],
  count: number,
  report?: BackfillReport,
): string {
  const { schedule } = detail;
  const facts = html`<dl class="facts"><dt>state</dt><dd>${stateCell(detail)}</dd><dt>cron</dt><dd><span class="mono">${schedule.cron}</span> in ${schedule.timezone}</dd>
<dt>next ticks</dt><dd class="num">${nextTicks(detail)}</dd><dt>overlap</dt><dd>${schedule.overlap}</dd><dt>queue</dt><dd class="mono">${queueName(schedule.queue)}</dd></dl>`;
  const more = html`<p class="muted">The newest ${count} of each. <a href="${schedulePath(schedule.id)}?count=${Math.min(count * 5, MAX_COUNT)}">Show more</a></p>`;
  const content = html`<p class="muted"><a href="${CONSOLE_PATH}">Schedules</a> / ${schedule.team}</p><h1>${schedule.id}</h1>${facts}
<section id="running"><h2>Running now</h2>${activeTable(schedule.queue, active)}</section>
${report ? reportTable(report) : ''}${ctx.signedIn ? actionForms(ctx, detail) : ''}
<section id="ticks"><h2>Ticks</h2>${tickTable(detail.ticks)}</section>
<section id="runs"><h2>Runs</h2>${runTable(detail.runs)}</section>
<section id="audit"><h2>Audit trail</h2>${auditTable(detail.actions)}</section>${more}`;
  return layout(ctx, schedule.id, content);
}

/** The sign-in form, or why there is none (no token configured). */
export function signInPage(ctx: PageContext, next: string): string {
  const content = ctx.writable
    ? html`<h1>Sign in</h1><p>The control token is the content of the file <span class="mono">TICKWARDEN_CONTROL_TOKEN_FILE</span> names (the Secret
<span class="mono">tickwarden-control-token</span> on Kubernetes). It is sent once; the browser keeps a session cookie, not the token.</p>
<form method="post" action="${CONSOLE_PATH}sign-in"><input type="hidden" name="next" value="${next}">
<label>control token <input type="password" name="token" required autocomplete="current-password"></label><button type="submit">Sign in</button></form>`
    : html`<h1>Read-only</h1><p>This replica has no control token (<span class="mono">TICKWARDEN_CONTROL_TOKEN_FILE</span> is not set): the console shows, and cannot act.</p>`;
  return layout(ctx, 'Sign in', content);
}

/** A page that says what went wrong (not found, refused, Redis unreachable). */
export function messagePage(ctx: PageContext, title: string, message: string): string {
  return layout(ctx, title, html`<h1>${title}</h1><p>${message}</p><p><a href="${CONSOLE_PATH}">All schedules</a></p>`);
}
