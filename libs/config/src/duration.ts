const UNITS = [
  ['d', 86_400_000],
  ['h', 3_600_000],
  ['m', 60_000],
  ['s', 1_000],
  ['ms', 1],
] as const;

/**
 * Each unit at most once, largest first: `1d`, `2h`, `10m`, `30s`, `500ms`, `1h30m`, `1.5s`.
 * (`m` cannot swallow the `m` of `ms`: the regex backtracks when no `s` group can follow.)
 */
const DURATION =
  /^(?:(\d+(?:\.\d+)?)d)?(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m)?(?:(\d+(?:\.\d+)?)s)?(?:(\d+(?:\.\d+)?)ms)?$/;

/**
 * The duration syntax as a JSON Schema `pattern` (ECMA-262, as `RegExp` reads it), for editors: it
 * also matches the empty string, and it cannot say that a fraction must make whole milliseconds.
 */
export const DURATION_PATTERN = DURATION.source;

/**
 * Parses a duration such as `500ms`, `30s`, `10m`, `2h`, `1d` or a combination with each unit
 * at most once, largest first (`1h30m`, `2m30s`); a component may have a decimal fraction
 * (`1.5s`) as long as the total is a whole number of milliseconds. Returns milliseconds, or
 * `undefined` for anything else (an empty string, a bare number, a negative value, spaces,
 * unknown or upper-case units, a total beyond `Number.MAX_SAFE_INTEGER`).
 */
export function parseDuration(text: string): number | undefined {
  if (text === '') return undefined;
  const match = DURATION.exec(text);
  if (match === null) return undefined;
  let total = 0;
  // Index loops and no split: every schedule parses several durations (defaults included).
  for (let index = 0; index < UNITS.length; index++) {
    const component = match[index + 1];
    if (component === undefined) continue;
    const unitMs = (UNITS[index] as (typeof UNITS)[number])[1];
    const point = component.indexOf('.');
    total += Number(point === -1 ? component : component.slice(0, point)) * unitMs;
    if (point !== -1) {
      const fraction = component.slice(point + 1);
      const fractionMs = (Number(fraction) * unitMs) / 10 ** fraction.length;
      if (!Number.isInteger(fractionMs)) return undefined;
      total += fractionMs;
    }
  }
  return Number.isSafeInteger(total) ? total : undefined;
}

/** Formats milliseconds with the largest units first: `90000` -> `1m30s`, `0` -> `0s`. */
export function formatDuration(ms: number): string {
  if (!Number.isSafeInteger(ms) || ms < 0) throw new RangeError(`not a duration in milliseconds: ${ms}`);
  if (ms === 0) return '0s';
  let rest = ms;
  let text = '';
  for (const [unit, unitMs] of UNITS) {
    const count = Math.floor(rest / unitMs);
    if (count > 0) {
      text += `${count}${unit}`;
      rest -= count * unitMs;
    }
  }
  return text;
}
