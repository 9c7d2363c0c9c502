import { CST, Lexer } from 'yaml';

/**
 * A big team file is parsed a few schedules at a time: `yaml` keeps about 100 bytes of syntax tree
 * per byte of YAML, so one 1 MB file of 10,000 schedules makes ~150 MB of short-lived objects at
 * once, and V8 grows its heap (young generation included) to hold them and does not give the
 * memory back to the system. Parsed in parts of a few KB, the same file stays within a few MB of
 * garbage at a time.
 */

/** The items of a file's top-level `schedules:` block sequence, by offset. */
export interface ScheduleItems {
  /** Where each item's first line starts (its indentation included). */
  starts: number[];
  /** Where the last item ends: the first line after the sequence, or the end of the text. */
  end: number;
}

/** One part of a file for the parser: the lines around the schedule list, and some of its items. */
export interface FilePart {
  text: string;
  /** Index in the whole file of the part's first schedule. */
  firstIndex: number;
  /** The offset in the whole file of an offset in `text`. */
  sourceOffset: (offset: number) => number;
  /** Whether errors outside `schedules[i]` are reported from this part (one part reports them, they are the same in every part). */
  reportsTopLevel: boolean;
}

/**
 * Lexemes after which splitting could change what the file means: an alias may name an anchor
 * in another part (and aliases are counted per document against resource exhaustion), tags and
 * directives apply to the document, several documents are an error, and a flow collection the
 * lexer had to end early is a syntax error. Such files are parsed whole.
 */
const WHOLE_FILE_LEXEMES: ReadonlySet<string> = new Set([
  'alias',
  'tag',
  'directive-line',
  'doc-start',
  'doc-end',
  'flow-error-end',
  'byte-order-mark',
  'explicit-key-ind',
]);

/** Where a line's first visible character stands (a comment's excepted). */
interface LineHead {
  lineStart: number;
  column: number;
}

const VISIBLE = /[^ \t\r\n]/;

/** Follows the lexemes through the text: offsets, lines, and whether a lexeme is the first thing on its line. */
class LineTracker {
  offset = 0;
  #lineStart = 0;
  #lineHasContent = false;
  #flowDepth = 0;

  /** Moves past a lexeme; returns its line head when it is the first thing on a line of block structure, else undefined. */
  advance(lexeme: string, type: string | null): LineHead | undefined {
    const at = this.offset;
    this.offset += lexeme.length;
    // Lines inside a flow collection (`{ ... }` over several lines) are not block structure.
    const inFlow = this.#flowDepth > 0;
    if (type === 'flow-map-start' || type === 'flow-seq-start') this.#flowDepth++;
    if (type === 'flow-map-end' || type === 'flow-seq-end') this.#flowDepth--;
    const content = lexeme.search(VISIBLE);
    // A block scalar or a multi-line quoted one may start with line breaks: its content starts a later line.
    const newlineBefore = content === -1 ? -1 : lexeme.lastIndexOf('\n', content);
    const lineStart = newlineBefore === -1 ? this.#lineStart : at + newlineBefore + 1;
    const isHead = content !== -1 && (newlineBefore !== -1 || !this.#lineHasContent) && type !== 'comment' && !inFlow;
    const lastNewline = lexeme.lastIndexOf('\n');
    if (lastNewline !== -1) {
      this.#lineStart = at + lastNewline + 1;
      this.#lineHasContent = VISIBLE.test(lexeme.slice(lastNewline + 1));
    } else if (content !== -1) this.#lineHasContent = true;
    return isHead ? { lineStart, column: at + content - lineStart } : undefined;
  }
}

type Phase = 'before' | 'key' | 'value' | 'items' | 'after';

/** Finds the top-level `schedules:` block list and its items, lexeme after lexeme. */
class ListFinder {
  #phase: Phase = 'before';
  #indent = -1;
  readonly #starts: number[] = [];
  #end: number | undefined;

  /** Takes the next lexeme; false when the file is not laid out as a `schedules:` block list. */
  step(lexeme: string, type: string | null, head: LineHead | undefined): boolean {
    switch (this.#phase) {
      case 'before':
        if (head?.column === 0 && lexeme === 'schedules') this.#phase = 'key';
        return true;
      case 'key':
        // `schedules` must be followed by `:` ...
        if (type === 'map-value-ind') this.#phase = 'value';
        return type === 'map-value-ind' || type === 'space';
      case 'value':
        // ... then nothing but a comment on its line, and a `-` first on the next line with content.
        if (head === undefined) return type === 'comment' || !VISIBLE.test(lexeme);
        if (type !== 'seq-item-ind') return false;
        this.#indent = head.column;
        this.#starts.push(head.lineStart);
        this.#phase = 'items';
        return true;
      case 'items':
        if (head === undefined || head.column > this.#indent) return true;
        if (head.column === this.#indent && type === 'seq-item-ind') this.#starts.push(head.lineStart);
        else {
          this.#end = head.lineStart;
          this.#phase = 'after';
        }
        return true;
      case 'after':
        return true;
    }
  }

  items(textLength: number): ScheduleItems | undefined {
    return this.#starts.length === 0 ? undefined : { starts: this.#starts, end: this.#end ?? textLength };
  }
}

/**
 * Finds the items of the top-level `schedules:` block sequence with yaml's own lexer, so quoted
 * and block scalars and flow collections spanning lines are never mistaken for item starts.
 * Returns undefined when the file is not laid out that way (`schedules: [...]`, no such key, an
 * alias or tag anywhere, ...): the caller then parses it whole.
 */
export function scheduleItems(text: string): ScheduleItems | undefined {
  const lines = new LineTracker();
  const list = new ListFinder();
  for (const lexeme of new Lexer().lex(text)) {
    const type = CST.tokenType(lexeme);
    // Markers the lexer adds: not part of the text.
    if (type === 'doc-mode' || type === 'scalar') continue;
    if (type !== null && WHOLE_FILE_LEXEMES.has(type)) return undefined;
    if (!list.step(lexeme, type, lines.advance(lexeme, type))) return undefined;
  }
  // The lexemes must add up to the text, or the offsets mean nothing.
  return lines.offset === text.length ? list.items(text.length) : undefined;
}

/**
 * The file in parts of at most about `maxBytes` of schedule items each (an item is never split):
 * each part is the text before the list, some items, and the text after the list, so it is a
 * file of its own with the same team and the same line layout around its items.
 */
export function* fileParts(text: string, items: ScheduleItems, maxBytes: number): Generator<FilePart> {
  const { starts, end } = items;
  const head = text.slice(0, starts[0]);
  const tail = text.slice(end);
  for (let first = 0; first < starts.length;) {
    const from = starts[first] as number;
    let next = first + 1;
    while (next < starts.length && (starts[next + 1] ?? end) - from <= maxBytes) next++;
    const to = starts[next] ?? end;
    const itemsEnd = head.length + (to - from);
    yield {
      text: head + text.slice(from, to) + tail,
      firstIndex: first,
      sourceOffset: (offset) =>
        offset < head.length ? offset : offset < itemsEnd ? offset - head.length + from : offset - itemsEnd + end,
      reportsTopLevel: first === 0,
    };
    first = next;
  }
}

/** The whole file as one part. */
export function wholeFile(text: string): FilePart {
  return { text, firstIndex: 0, sourceOffset: (offset) => offset, reportsTopLevel: true };
}
