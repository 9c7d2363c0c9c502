import { LineCounter, isAlias, isMap, isScalar, isSeq, type Document, type Node, type Pair } from 'yaml';

export interface Position {
  line: number;
  column: number;
}

/** What a field path leads to in the YAML tree. */
export interface Located {
  /** The deepest node reached: the value at the full path, or the collection where the walk stopped. */
  node: Node | undefined;
  /** The key node of the last pair walked through (the key of `node` when the path was found). */
  key: Node | undefined;
  /** True when every segment of the path was found. */
  complete: boolean;
}

/**
 * Finds YAML nodes by the field paths zod reports, following aliases and `<<` merge keys, and turns
 * node offsets into 1-based line and column of the file (the document may be a part of it).
 */
export class Locator {
  readonly #doc: Document;
  readonly #lines: LineCounter;
  readonly #sourceOffset: (offset: number) => number;

  /** `lines` counts the lines of the whole file; `sourceOffset` turns an offset in the document into one in the file. */
  constructor(doc: Document, lines: LineCounter, sourceOffset: (offset: number) => number) {
    this.#doc = doc;
    this.#lines = lines;
    this.#sourceOffset = sourceOffset;
  }

  locate(path: readonly (string | number)[]): Located {
    // The node found is returned as written: an alias stays an alias, so an error points at its use.
    let node = asNode(this.#doc.contents);
    let key: Node | undefined;
    for (const [index, segment] of path.entries()) {
      node = this.#resolve(node);
      let next: { key: Node | undefined; value: Node | undefined } | undefined;
      if (isMap(node)) {
        const pair = this.#findPair(node.items, String(segment), 0);
        if (pair !== undefined) next = { key: asNode(pair.key), value: asNode(pair.value) };
      } else if (isSeq(node) && typeof segment === 'number') {
        const item = node.items[segment];
        if (item !== undefined) next = { key: undefined, value: asNode(item) };
      }
      if (next === undefined) return { node, key, complete: false };
      key = next.key;
      // A key without a value (`cron:`) has no node, or an empty one: the key is the better place.
      if (next.value === undefined || isEmptyScalar(next.value))
        return { node: next.key ?? node, key, complete: index === path.length - 1 };
      node = next.value;
    }
    return { node, key, complete: true };
  }

  /** Position of a node's first character; 1:1 when there is none (an empty document). */
  position(node: Node | undefined): Position {
    return this.offsetPosition(node?.range?.[0] ?? 0);
  }

  offsetPosition(offset: number): Position {
    return linePosition(this.#lines, this.#sourceOffset(offset));
  }

  /** The pair for `key`, looking into `<<` merge sources when the mapping does not set it itself. */
  #findPair(items: readonly Pair[], key: string, depth: number): Pair | undefined {
    const own = items.find((pair) => isScalar(pair.key) && String(pair.key.value) === key);
    if (own !== undefined || depth > 10) return own;
    for (const pair of items) {
      if (!isScalar(pair.key) || pair.key.value !== '<<') continue;
      const merged = this.#resolve(asNode(pair.value));
      const sources = isSeq(merged) ? merged.items.map((item) => this.#resolve(asNode(item))) : [merged];
      for (const source of sources) {
        if (!isMap(source)) continue;
        const found = this.#findPair(source.items, key, depth + 1);
        if (found !== undefined) return found;
      }
    }
    return undefined;
  }

  #resolve(node: Node | undefined): Node | undefined {
    return isAlias(node) ? (node.resolve(this.#doc) ?? node) : node;
  }
}

function asNode(value: unknown): Node | undefined {
  return isAlias(value) || isScalar(value) || isMap(value) || isSeq(value) ? value : undefined;
}

function isEmptyScalar(node: Node): boolean {
  return (
    isScalar(node) &&
    node.value === null &&
    node.range !== undefined &&
    node.range !== null &&
    node.range[0] === node.range[1]
  );
}

/** The 1-based line and column of an offset in the file whose lines `lines` counts. */
export function linePosition(lines: LineCounter, offset: number): Position {
  const { line, col } = lines.linePos(offset);
  return { line: Math.max(1, line), column: Math.max(1, col) };
}

/** The line starts of a text, as yaml's parser counts them (after each `\n`). */
export function countLines(text: string): LineCounter {
  const lines = new LineCounter();
  lines.addNewLine(0);
  for (let at = text.indexOf('\n'); at !== -1; at = text.indexOf('\n', at + 1)) lines.addNewLine(at + 1);
  return lines;
}
