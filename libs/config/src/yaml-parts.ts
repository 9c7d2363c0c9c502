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
  /** The column of each item's `-`. */
  indent: number;
}

/** One part of a file for the parser: the lines around the schedule list, and some of its items. */
export interface FilePart {
  text: string;
  /** Index in the whole file of the part's first schedule. */
  firstIndex: number;
  /** How many schedule items the part has (undefined: the whole file); a parse that finds another count cut through a multi-line node. */
  items: number | undefined;
  /** The offset in the whole file of an offset in `text`. */
  sourceOffset: (offset: number) => number;
  /** Whether errors outside `schedules[i]` are reported from this part (one part reports them, they are the same in every part). */
  reportsTopLevel: boolean;
}

const VISIBLE = /[^ \t\r\n]/;
/** A line that ends or starts a document, or a directive: splitting around it could change the documents. */
const DOCUMENT_LINE = /^(---|\.\.\.|%)/m;
/** Anchors, aliases and tags: in the text around the list they would apply to each part's copy of it. */
const NODE_PROPERTY = /[&*!]/;
const SCHEDULES_KEY = /^schedules:[ \t]*(#.*)?$/;
const ITEM_START = /^( *)-(?:[ \t]|$)/;

/**
 * Finds the items of the top-level `schedules:` block sequence line by line, without lexing the
 * file: an item starts at a line whose first character, at the first item's indentation, is a `-`
 * followed by a blank; the list ends at the first other line at or left of that indentation that
 * is not blank or a comment. A quoted scalar or a flow collection spanning lines may fool this
 * scan; a part cut through one has a YAML error or another item count, and the caller then parses
 * the file whole (`FilePart.items`). Returns undefined when the file is not laid out as such a list
 * (`schedules: [...]`, no such key) or the text around the list has several documents, an anchor,
 * alias or tag.
 */
export function scheduleItems(text: string): ScheduleItems | undefined {
  const starts: number[] = [];
  let indent = -1;
  let end = text.length;
  let keyFound = false;
  for (let lineStart = 0; lineStart < text.length;) {
    const newline = text.indexOf('\n', lineStart);
    const next = newline === -1 ? text.length : newline + 1;
    const line = text.slice(lineStart, newline === -1 ? text.length : newline).replace(/\r$/, '');
    const content = line.search(VISIBLE);
    if (!keyFound) keyFound = SCHEDULES_KEY.test(line);
    else if (content !== -1 && line[content] !== '#') {
      const item = ITEM_START.exec(line);
      if (indent === -1) {
        if (item === null) return undefined;
        indent = content;
      }
      if (item !== null && content === indent) starts.push(lineStart);
      else if (content <= indent) {
        end = lineStart;
        break;
      }
    }
    lineStart = next;
  }
  if (starts.length === 0) return undefined;
  const around = text.slice(0, starts[0]) + text.slice(end);
  return DOCUMENT_LINE.test(around) || NODE_PROPERTY.test(around) ? undefined : { starts, end, indent };
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
      items: next - first,
      sourceOffset: (offset) =>
        offset < head.length ? offset : offset < itemsEnd ? offset - head.length + from : offset - itemsEnd + end,
      reportsTopLevel: first === 0,
    };
    first = next;
  }
}

/** The whole file as one part. */
export function wholeFile(text: string): FilePart {
  return { text, firstIndex: 0, items: undefined, sourceOffset: (offset) => offset, reportsTopLevel: true };
}
