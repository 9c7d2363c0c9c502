// The console's form fields, checked before anything is done: a clear message per bad field.
import { BACKFILL_MAX_LIMIT, DEFAULT_BACKFILL_MAX } from './backfill-plan.ts';
import type { BackfillRequest, Said } from './control-actions.ts';

export const MAX_BY_CHARS = 100;
export const MAX_NOTE_CHARS = 500;

/** A form field that cannot be used as given: the action is not done, and the message says why. */
export class FormError extends Error {}

/** How a field's bad value is echoed in a message: quoted, cut short. */
const echo = (text: string): string => JSON.stringify(text.length > 40 ? `${text.slice(0, 40)}...` : text);

/** Who acts and why, from the form's `by` (required: the audit trail names who) and `note`. */
export function saidFrom(form: URLSearchParams): Said {
  const by = (form.get('by') ?? '').trim();
  const note = (form.get('note') ?? '').trim();
  if (by === '') throw new FormError('by: required: who does this (a name or an e-mail address), for the audit trail');
  if (by.length > MAX_BY_CHARS) throw new FormError(`by: at most ${MAX_BY_CHARS} characters, got ${by.length}`);
  if (note.length > MAX_NOTE_CHARS)
    throw new FormError(`note: at most ${MAX_NOTE_CHARS} characters, got ${note.length}`);
  if (/\p{Cc}/u.test(by) || /\p{Cc}/u.test(note))
    throw new FormError('by and note: one line of text, without control characters');
  return { by, note };
}

const WITHOUT_ZONE = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,3})?)?$/;
const WITH_ZONE = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,3})?)?(Z|[+-]\d{2}:\d{2})$/i;

/** An instant of the backfill form: a `datetime-local` value (no zone) is UTC; ISO 8601 with a zone is taken as written. */
export function utcInstant(field: string, raw: string | null): number {
  const text = (raw ?? '').trim();
  const ms = WITHOUT_ZONE.test(text) ? Date.parse(`${text}Z`) : WITH_ZONE.test(text) ? Date.parse(text) : Number.NaN;
  if (Number.isNaN(ms))
    throw new FormError(
      `${field}: expected a time in UTC such as 2026-03-29T02:00 (or ISO 8601 with a zone), got ${echo(text)}`,
    );
  return ms;
}

/** A backfill's range and bounds from its form: `from`, `to`, `max` (default the CLI's), `dryRun` (a checkbox). */
export function backfillFrom(form: URLSearchParams): BackfillRequest {
  const fromMs = utcInstant('from', form.get('from'));
  const toMs = utcInstant('to', form.get('to'));
  const maxText = (form.get('max') ?? '').trim();
  const max = maxText === '' ? DEFAULT_BACKFILL_MAX : /^\d+$/.test(maxText) ? Number(maxText) : Number.NaN;
  if (!(max >= 1 && max <= BACKFILL_MAX_LIMIT))
    throw new FormError(`max: expected a whole number from 1 to ${BACKFILL_MAX_LIMIT}, got ${echo(maxText)}`);
  return { fromMs, toMs, max, dryRun: form.get('dryRun') === 'on' };
}
