/**
 * A reader for the plain shape most schedule items have: block mappings of one-line values (plain
 * or quoted without escapes, flow collections on one line) and block sequences of such values.
 * It allocates little more than the values it returns, where the `yaml` package builds a token
 * stream, a syntax tree and a document first. It answers only what it is sure of: an item with
 * anything else (an anchor, a tag, a comment after a value, a multi-line scalar, an escape, a
 * duplicate key, a scalar that could be a number it does not read) is left to the `yaml` package.
 */

/** One schedule item read: its value as `yaml` turns it into data, and where its `name` value starts. */
export interface SimpleItem {
  value: Record<string, unknown>;
  /** The offset in the file of the `name` value's first character (its quote, if quoted). */
  nameAt: number | undefined;
}

/** A line of an item: its indentation, and where its content starts and ends in the file. */
interface Line {
  indent: number;
  start: number;
  end: number;
}

const NOT_SIMPLE = Symbol('not simple');
type Result<T> = T | typeof NOT_SIMPLE;

const KEY = /^[A-Za-z_][A-Za-z0-9_-]*$/;
const NULL = /^(?:[Nn]ull|NULL)$/;
const BOOLEAN = /^(?:[Tt]rue|TRUE|[Ff]alse|FALSE)$/;
const INTEGER = /^(?:0|[1-9][0-9]{0,14})$/;
/** The core schema's numbers (int.js, float.js of `yaml`): any other one, such as `0o17` or `1e3`, is left to `yaml`. */
const NUMBER = /^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+|[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?)$/;
/** What a plain scalar the reader takes may start with (no indicator, sign or dot). */
const PLAIN_START = /^[A-Za-z0-9_/]/;

/**
 * Reads the block sequence item `text.slice(from, to)`, whose `-` stands at column `indent` and is
 * followed by one space and the first key of a mapping; undefined when the item is not of the
 * plain shape (the caller then has it parsed by `yaml`).
 */
export function simpleItem(text: string, from: number, to: number, indent: number): SimpleItem | undefined {
  if (hasUnsureChar(text, from, to)) return undefined;
  const lines = contentLines(text, from, to);
  const first = lines?.[0];
  if (lines === undefined || first === undefined || first.indent !== indent || !text.startsWith('- ', first.start))
    return undefined;
  if (text[first.start + 2] === ' ') return undefined;
  lines[0] = { indent: indent + 2, start: first.start + 2, end: first.end };
  const reader = new BlockReader(text, lines);
  const value = reader.mapping(indent + 2);
  if (value === NOT_SIMPLE || reader.next < lines.length) return undefined;
  return { value, nameAt: reader.nameAt };
}

/** Whether the text has a character the reader leaves to `yaml`: a tab, carriage return or other control, a byte order mark. */
function hasUnsureChar(text: string, from: number, to: number): boolean {
  for (let at = from; at < to; at++) {
    const code = text.charCodeAt(at);
    if ((code < 0x20 && code !== 0x0a) || (code >= 0x7f && code <= 0x9f)) return true;
    if (code === 0xfeff || code === 0x2028 || code === 0x2029) return true;
  }
  return false;
}

/** The item's lines that are not blank or comments, trailing spaces cut; undefined if one has a comment after a value. */
function contentLines(text: string, from: number, to: number): Line[] | undefined {
  const lines: Line[] = [];
  for (let start = from; start < to;) {
    const newline = text.indexOf('\n', start);
    const lineEnd = newline === -1 || newline > to ? to : newline;
    let end = lineEnd;
    while (end > start && text[end - 1] === ' ') end--;
    let content = start;
    while (content < end && text[content] === ' ') content++;
    if (content < end && text[content] !== '#') {
      if (text.slice(content, end).includes('#')) return undefined;
      lines.push({ indent: content - start, start: content, end });
    }
    start = lineEnd + 1;
  }
  return lines;
}

class BlockReader {
  readonly #text: string;
  readonly #lines: Line[];
  next = 0;
  nameAt: number | undefined;

  constructor(text: string, lines: Line[]) {
    this.#text = text;
    this.#lines = lines;
  }

  /** The block mapping whose keys stand at column `indent`, from the next line on. */
  mapping(indent: number): Result<Record<string, unknown>> {
    const value: Record<string, unknown> = {};
    const top = this.next === 0;
    for (
      let line = this.#lines[this.next];
      line !== undefined && line.indent >= indent;
      line = this.#lines[this.next]
    ) {
      if (line.indent !== indent) return NOT_SIMPLE;
      this.next++;
      const content = this.#text.slice(line.start, line.end);
      const colon = content.indexOf(':');
      const key = content.slice(0, colon);
      if (colon === -1 || !isKey(key) || Object.hasOwn(value, key)) return NOT_SIMPLE;
      const rest = content.slice(colon + 1);
      let entry: Result<unknown>;
      if (rest === '') entry = this.#nested(indent);
      else if (rest[0] !== ' ') return NOT_SIMPLE;
      else {
        const trimmed = rest.trimStart();
        if (top && key === 'name') this.nameAt = line.end - trimmed.length;
        entry = inlineValue(trimmed);
        // a deeper line after a one-line value would continue it (a multi-line scalar)
        if ((this.#lines[this.next]?.indent ?? 0) > indent) return NOT_SIMPLE;
      }
      if (entry === NOT_SIMPLE) return NOT_SIMPLE;
      value[key] = entry;
    }
    return value;
  }

  /** The value on the lines after `key:`, indented deeper than the key: a mapping or a sequence. */
  #nested(indent: number): Result<unknown> {
    const line = this.#lines[this.next];
    if (line === undefined || line.indent <= indent) return NOT_SIMPLE;
    return this.#text.startsWith('- ', line.start) ? this.#sequence(line.indent) : this.mapping(line.indent);
  }

  /** A block sequence of one-line values whose `-` stand at column `indent`. */
  #sequence(indent: number): Result<unknown[]> {
    const items: unknown[] = [];
    for (
      let line = this.#lines[this.next];
      line !== undefined && line.indent >= indent;
      line = this.#lines[this.next]
    ) {
      if (line.indent !== indent || !this.#text.startsWith('- ', line.start)) return NOT_SIMPLE;
      this.next++;
      const item = inlineValue(this.#text.slice(line.start + 2, line.end).trimStart());
      if (item === NOT_SIMPLE || (this.#lines[this.next]?.indent ?? 0) > indent) return NOT_SIMPLE;
      items.push(item);
    }
    return items;
  }
}

function isKey(key: string): boolean {
  return KEY.test(key) && !NULL.test(key) && !BOOLEAN.test(key) && key !== '__proto__';
}

/** A value that fills the rest of a line in block context. */
function inlineValue(text: string): Result<unknown> {
  if (text[0] === '{' || text[0] === '[') {
    const flow = new FlowReader(text);
    const value = flow.value();
    return flow.at === text.length ? value : NOT_SIMPLE;
  }
  if (text[0] === '"' || text[0] === "'") return quoted(text, text[0]) === text.length ? text.slice(1, -1) : NOT_SIMPLE;
  // `: ` would start a mapping, a final `:` a key
  if (text.includes(': ') || text.endsWith(':')) return NOT_SIMPLE;
  return plainScalar(text);
}

/** The end of the quoted scalar at the start of `text` (no escapes, no doubled quote), or -1. */
function quoted(text: string, quote: string): number {
  const close = text.indexOf(quote, 1);
  if (close === -1 || (quote === '"' && text.slice(1, close).includes('\\')) || text[close + 1] === quote) return -1;
  return close + 1;
}

/** A plain scalar resolved as the core schema does, for the forms the reader is sure of. */
function plainScalar(text: string): Result<unknown> {
  if (!PLAIN_START.test(text)) return NOT_SIMPLE;
  if (NULL.test(text)) return null;
  if (BOOLEAN.test(text)) return text[0] === 't' || text[0] === 'T';
  if (INTEGER.test(text)) return Number(text);
  return NUMBER.test(text) ? NOT_SIMPLE : text;
}

/** A flow collection on one line: `{ kind: command, argv: ["true"] }`. */
class FlowReader {
  readonly #text: string;
  at = 0;

  constructor(text: string) {
    this.#text = text;
  }

  value(): Result<unknown> {
    const char = this.#text[this.at];
    if (char === '{') return this.#collection('}', {} as Record<string, unknown>, (into) => this.#pair(into));
    if (char === '[') return this.#collection(']', [] as unknown[], (into) => this.#item(into));
    if (char === '"' || char === "'") {
      const end = quoted(this.#text.slice(this.at), char);
      if (end === -1) return NOT_SIMPLE;
      const value = this.#text.slice(this.at + 1, this.at + end - 1);
      this.at += end;
      return value;
    }
    const end = this.#text.slice(this.at).search(/[,\]}]|$/) + this.at;
    const text = this.#text.slice(this.at, end).trimEnd();
    // in flow context `:` may end a key; the reader does not take it in a scalar
    if (text.includes(':') || /[[{"']/.test(text)) return NOT_SIMPLE;
    this.at = end;
    return plainScalar(text);
  }

  /** The entries between the opening character at `at` and `close`, each read by `entry`. */
  #collection<T>(close: string, into: T, entry: (into: T) => boolean): Result<T> {
    this.at++;
    this.#spaces();
    if (this.#text[this.at] === close) {
      this.at++;
      return into;
    }
    for (;;) {
      if (!entry(into)) return NOT_SIMPLE;
      this.#spaces();
      const char = this.#text[this.at++];
      if (char === close) return into;
      if (char !== ',') return NOT_SIMPLE;
      this.#spaces();
      // a comma before the closing character leaves an empty entry: left to `yaml`
      if (this.#text[this.at] === close) return NOT_SIMPLE;
    }
  }

  #pair(into: Record<string, unknown>): boolean {
    const colon = this.#text.indexOf(': ', this.at);
    const key = colon === -1 ? '' : this.#text.slice(this.at, colon);
    if (!isKey(key) || Object.hasOwn(into, key)) return false;
    this.at = colon + 2;
    this.#spaces();
    const value = this.value();
    if (value === NOT_SIMPLE) return false;
    into[key] = value;
    return true;
  }

  #item(into: unknown[]): boolean {
    const value = this.value();
    if (value === NOT_SIMPLE) return false;
    into.push(value);
    return true;
  }

  #spaces(): void {
    while (this.#text[this.at] === ' ') this.at++;
  }
}
