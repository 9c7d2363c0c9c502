// The web console's routes on the replica's HTTP port: GET pages for anyone who reaches the port,
// POST forms (pause, resume, trigger, backfill) only with a control token configured and a
// browser signed in with it (console-auth.ts).
import type { PageHandler, PageRequest, PageResponse } from '@tickwarden/runtime';
import type { ScheduleConfig } from '@tickwarden/config';
import { ActiveRuns } from './active-runs.ts';
import {
  parseCookies,
  sameToken,
  SESSION_COOKIE,
  SESSION_MS,
  sessionValue,
  setCookie,
  validSession,
} from './console-auth.ts';
import { backfillFrom, FormError, saidFrom } from './console-forms.ts';
import { CONSOLE_PATH, listPage, messagePage, schedulePage, signInPage, type PageContext } from './console-pages.ts';
import {
  BackfillRangeError,
  backfillSchedule,
  pauseSchedule,
  resumeSchedule,
  triggerSchedule,
  type BackfillReport,
  type ControlContext,
  type Said,
} from './control-actions.ts';
import { DEFAULT_COUNT, MAX_COUNT, type ScheduleStatus } from './schedule-status.ts';
import { badNumberMessage, wholeNumber } from './status-api.ts';

/** Schedules per page of the list, by default and at most. */
const PAGE_LIMIT = 500;
/** What an action did, shown once by the page it redirects to (a cookie: the next request may reach another replica). */
const FLASH_COOKIE = 'tickwarden-flash';
const FLASH_MAX_AGE_S = 60;
/** The `by` of the browser's last action, filled in again. */
const BY_COOKIE = 'tickwarden-by';
const BY_MAX_AGE_S = 30 * 86_400;

/** No script, style or form target from anywhere else; not framed (clickjacking); nothing cached; a form's Origin sent (no-referrer would make it null). */
const HTML_HEADERS = {
  'content-type': 'text/html; charset=utf-8',
  'content-security-policy':
    "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
  'x-frame-options': 'DENY',
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'same-origin',
  'cache-control': 'no-store',
};

const SCHEDULE_PAGE = /^\/console\/schedules\/([a-z0-9-]+\/[a-z0-9-]+)$/;
const SCHEDULE_ACTION = /^\/console\/schedules\/([a-z0-9-]+\/[a-z0-9-]+)\/(pause|resume|trigger|backfill)$/;
/** Where a sign-in may send the browser back to: a console page, never another site. */
const NEXT_PATH = /^\/console\/[a-z0-9/-]*$/;
const SIGN_IN_PATH = `${CONSOLE_PATH}sign-in`;
const nextPath = (next: string | null): string =>
  next !== null && NEXT_PATH.test(next) && next !== SIGN_IN_PATH ? next : CONSOLE_PATH;

const READ_ONLY =
  'This replica has no control token (TICKWARDEN_CONTROL_TOKEN_FILE is not set): the console is read-only, and pause, resume, trigger and backfill are refused.';

export interface ConsoleOptions {
  schedules: ScheduleStatus;
  /** What the actions run with: the replica's queue connection and lock nodes, publishing as the replica. */
  control: ControlContext;
  /** The control token (read at start); undefined: read-only. */
  token: string | undefined;
  replicaId: string;
}

/** The console's page handler, and what it holds open (BullMQ queue handles, to read the runs in progress). */
export interface WebConsole {
  pages: PageHandler;
  close(): Promise<void>;
}

type Action = 'pause' | 'resume' | 'trigger' | 'backfill';

const messageOf = (error: unknown): string => (error instanceof Error ? error.message : String(error));

function answer(status: number, body: string, headers: Record<string, string | string[]> = {}): PageResponse {
  return { status, headers: { ...HTML_HEADERS, ...headers }, body };
}

const redirect = (location: string, cookies: string[] = []): PageResponse => ({
  status: 303,
  headers: { location, 'cache-control': 'no-store', 'set-cookie': cookies },
  body: '',
});

/**
 * A POST from another site's page: its Origin is not this host. The session cookie is SameSite=Strict
 * (such a POST does not carry it) and form-action 'self' keeps this console's forms here; this check
 * also refuses a cross-site sign-in. A request without Origin (curl) still needs the cookie to act.
 */
function crossSite(request: PageRequest): boolean {
  const origin = request.headers.origin;
  if (origin === undefined) return false;
  try {
    return new URL(origin).host !== request.headers.host;
  } catch {
    return true;
  }
}

/** The web console: `/console/` lists the schedules, `/console/schedules/<team>/<name>` shows one and takes its actions. */
export function webConsole(options: ConsoleOptions): WebConsole {
  const { schedules, control, token, replicaId } = options;
  const active = new ActiveRuns(control.redis);
  const log = control.logger;

  const context = (request: PageRequest): PageContext => {
    const cookies = parseCookies(request.headers.cookie);
    const nowMs = control.now();
    const flashText = cookies.get(FLASH_COOKIE);
    return {
      replicaId,
      writable: token !== undefined,
      signedIn: token !== undefined && validSession(token, cookies.get(SESSION_COOKIE), nowMs),
      path: request.path,
      nowMs,
      flash: flashText ? { kind: 'done', text: flashText } : undefined,
      by: cookies.get(BY_COOKIE),
    };
  };

  /** A page that shows the flash it was sent with: the flash is deleted with it. */
  const shown = (ctx: PageContext, status: number, body: string): PageResponse =>
    answer(status, body, ctx.flash ? { 'set-cookie': [setCookie(FLASH_COOKIE, '', 0)] } : {});

  const list = async (ctx: PageContext, query: URLSearchParams): Promise<PageResponse> => {
    const limit = wholeNumber(query, 'limit', PAGE_LIMIT, 1, PAGE_LIMIT);
    const offset = wholeNumber(query, 'offset', 0, 0, Number.MAX_SAFE_INTEGER);
    if (limit === undefined)
      return answer(400, messagePage(ctx, 'Bad request', badNumberMessage(query, 'limit', 1, PAGE_LIMIT)));
    if (offset === undefined)
      return answer(
        400,
        messagePage(ctx, 'Bad request', badNumberMessage(query, 'offset', 0, Number.MAX_SAFE_INTEGER)),
      );
    const { total, summaries } = await schedules.page(offset, limit);
    const latest = await schedules.latest(summaries.map((summary) => summary.schedule.id));
    return shown(
      ctx,
      200,
      listPage(ctx, {
        total,
        offset,
        limit,
        rows: summaries.map((summary, i) => ({ summary, latest: latest[i] ?? { tick: undefined, run: undefined } })),
      }),
    );
  };

  const detail = async (
    ctx: PageContext,
    schedule: ScheduleConfig,
    query: URLSearchParams,
    status = 200,
    report?: BackfillReport,
  ): Promise<PageResponse> => {
    const count = wholeNumber(query, 'count', DEFAULT_COUNT, 1, MAX_COUNT);
    if (count === undefined)
      return answer(400, messagePage(ctx, 'Bad request', badNumberMessage(query, 'count', 1, MAX_COUNT)));
    const [read, running] = await Promise.all([schedules.detail(schedule, count), active.of(schedule)]);
    return shown(ctx, status, schedulePage(ctx, read, running, count, report));
  };

  const notFound = (ctx: PageContext, message: string): PageResponse =>
    answer(404, messagePage(ctx, 'Not found', message));
  const unknownSchedule = (ctx: PageContext, id: string): PageResponse =>
    notFound(ctx, `No schedule "${id}" in this replica's configuration.`);

  const view = async (request: PageRequest, ctx: PageContext): Promise<PageResponse> => {
    if (request.path === CONSOLE_PATH) return list(ctx, request.query);
    if (request.path === SIGN_IN_PATH) return answer(200, signInPage(ctx, nextPath(request.query.get('next'))));
    const match = SCHEDULE_PAGE.exec(request.path);
    if (!match) return notFound(ctx, `Nothing at ${request.path}.`);
    const schedule = schedules.find(match[1] as string);
    return schedule ? detail(ctx, schedule, request.query) : unknownSchedule(ctx, match[1] as string);
  };

  const signIn = (ctx: PageContext, form: URLSearchParams): PageResponse => {
    if (token === undefined) return answer(403, messagePage(ctx, 'Read-only', READ_ONLY));
    const next = nextPath(form.get('next'));
    if (!sameToken(form.get('token') ?? '', token)) {
      log.warn('console sign-in refused: not the control token');
      return answer(
        403,
        signInPage({ ...ctx, flash: { kind: 'error', text: 'That is not the control token.' } }, next),
      );
    }
    log.info('console sign-in');
    return redirect(next, [setCookie(SESSION_COOKIE, sessionValue(token, ctx.nowMs + SESSION_MS), SESSION_MS / 1000)]);
  };

  /** Does the action; the flash line that says what it did, or a dry run's report. */
  const perform = async (
    action: Action,
    schedule: ScheduleConfig,
    form: URLSearchParams,
    said: Said,
  ): Promise<string | BackfillReport> => {
    if (action === 'pause') {
      await pauseSchedule(control, schedule, said);
      return `paused by ${said.by}`;
    }
    if (action === 'resume')
      return (await resumeSchedule(control, schedule, said))
        ? `resumed by ${said.by}`
        : 'was not paused: nothing to resume';
    if (action === 'trigger') {
      return `triggered: job ${await triggerSchedule(control, schedule, said)}`;
    }
    const request = backfillFrom(form);
    const report = await backfillSchedule(control, schedule, request, said);
    if (request.dryRun) return report;
    return `backfill ${new Date(request.fromMs).toISOString()} .. ${new Date(request.toMs).toISOString()}: ${report.fired} fired, ${report.skipped} skipped${report.failed > 0 ? `, ${report.failed} failed (see the audit trail and the logs)` : ''}`;
  };

  const act = async (ctx: PageContext, form: URLSearchParams, id: string, action: Action): Promise<PageResponse> => {
    if (token === undefined) return answer(403, messagePage(ctx, 'Read-only', READ_ONLY));
    if (!ctx.signedIn)
      return answer(
        403,
        messagePage(
          ctx,
          'Sign in first',
          'Pause, resume, trigger and backfill need a browser signed in with the control token.',
        ),
      );
    const schedule = schedules.find(id);
    if (!schedule) return unknownSchedule(ctx, id);
    // The schedule's page with the reason; when the queue Redis cannot show it either, the reason alone.
    const failed = (status: number, text: string) => {
      const flash = { kind: 'error' as const, text: `${action} not done: ${text}` };
      return detail({ ...ctx, flash }, schedule, new URLSearchParams(), status).catch(() =>
        answer(status, messagePage({ ...ctx, flash }, 'Not done', text)),
      );
    };
    try {
      const said = saidFrom(form);
      const done = await perform(action, schedule, form, said);
      log.info({ schedule: id, action, by: said.by, note: said.note }, 'console action');
      if (typeof done !== 'string')
        return detail(
          { ...ctx, flash: { kind: 'done', text: `dry run: ${done.fired} would fire, ${done.skipped} skipped` } },
          schedule,
          new URLSearchParams(),
          200,
          done,
        );
      return redirect(`${CONSOLE_PATH}schedules/${id}`, [
        setCookie(FLASH_COOKIE, `${id} ${done}`, FLASH_MAX_AGE_S),
        setCookie(BY_COOKIE, said.by, BY_MAX_AGE_S),
      ]);
    } catch (error) {
      if (error instanceof FormError || error instanceof BackfillRangeError) return failed(400, error.message);
      log.warn({ schedule: id, action, err: error }, 'console action failed');
      return failed(503, messageOf(error));
    }
  };

  const post = async (request: PageRequest, ctx: PageContext): Promise<PageResponse> => {
    if (crossSite(request)) return answer(403, messagePage(ctx, 'Refused', 'A form of another site cannot act here.'));
    const form = new URLSearchParams(request.body);
    if (request.path === SIGN_IN_PATH) return signIn(ctx, form);
    if (request.path === `${CONSOLE_PATH}sign-out`) return redirect(CONSOLE_PATH, [setCookie(SESSION_COOKIE, '', 0)]);
    const match = SCHEDULE_ACTION.exec(request.path);
    if (!match) return notFound(ctx, `Nothing to post to at ${request.path}.`);
    return act(ctx, form, match[1] as string, match[2] as Action);
  };

  const pages: PageHandler = async (request) => {
    if (request.path === '/' || request.path === '/console') return redirect(CONSOLE_PATH);
    if (!request.path.startsWith(CONSOLE_PATH)) return undefined;
    const ctx = context(request);
    try {
      if (request.method === 'GET' || request.method === 'HEAD') return await view(request, ctx);
      if (request.method === 'POST') return await post(request, ctx);
      return answer(
        405,
        messagePage(ctx, 'Method not allowed', `The console answers GET and POST, not ${request.method}.`),
        { allow: 'GET, HEAD, POST' },
      );
    } catch (error) {
      return answer(503, messagePage(ctx, 'Unavailable', `Cannot read the queue Redis: ${messageOf(error)}`));
    }
  };

  return { pages, close: () => active.close() };
}
