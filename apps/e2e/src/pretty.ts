/** pino's numeric levels, as a reader expects them. */
const LEVELS: Record<number, string> = { 10: 'TRACE', 20: 'DEBUG', 30: 'INFO', 40: 'WARN', 50: 'ERROR', 60: 'FATAL' };
/** Fields every line has, or that the line's prefix already says. */
const HIDDEN = new Set(['level', 'time', 'pid', 'hostname', 'msg', 'worker', 'replica']);
const COLORS = [36, 35, 33, 32, 34, 91, 92, 93, 94, 95];

/**
 * One log line made readable: `HH:MM:SS.mmm process LEVEL message key=value ...`.
 * pino JSON is formatted (errors show their message and code); any other line
 * is printed as it came.
 */
export function prettyLine(process: string, line: string, options: { color: boolean; width: number }): string {
  const name = options.color
    ? `\x1b[${COLORS[hash(process) % COLORS.length]}m${process.padEnd(options.width)}\x1b[0m`
    : process.padEnd(options.width);
  let record: Record<string, unknown>;
  try {
    record = JSON.parse(line) as Record<string, unknown>;
    if (!record || typeof record !== 'object' || typeof record['msg'] !== 'string') throw new Error('not a log record');
  } catch {
    return `${clock(Date.now())} ${name} ${line}`;
  }
  const level = LEVELS[Number(record['level'])] ?? 'INFO';
  const fields = Object.entries(record)
    .filter(([key]) => !HIDDEN.has(key))
    .map(([key, value]) => `${key}=${formatValue(value)}`)
    .join(' ');
  const levelText =
    options.color && Number(record['level']) >= 40 ? `\x1b[31m${level.padEnd(5)}\x1b[0m` : level.padEnd(5);
  return `${clock(Number(record['time']) || Date.now())} ${name} ${levelText} ${String(record['msg'])}${fields ? `  ${fields}` : ''}`;
}

function formatValue(value: unknown): string {
  if (value && typeof value === 'object' && 'message' in value) {
    const error = value as { message: unknown; code?: unknown };
    return JSON.stringify(error.code ? `${String(error.code)}: ${String(error.message)}` : String(error.message));
  }
  return typeof value === 'string' && !/\s/.test(value) ? value : JSON.stringify(value);
}

function clock(ms: number): string {
  return new Date(ms).toISOString().slice(11, 23);
}

function hash(text: string): number {
  let h = 0;
  for (const char of text) h = (h * 31 + char.charCodeAt(0)) >>> 0;
  return h;
}
