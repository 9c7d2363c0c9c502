/**
 * What a heap snapshot holds (`node --heapsnapshot-signal=SIGUSR2`, then `kill -USR2 <pid>`):
 * self size and count by kind, plain objects by their first property names, and strings by
 * shape (digits replaced by #), the top N of each (default 20).
 *
 *   node --max-old-space-size=8000 apps/scheduler/bench/heap-snapshot-report.ts <file.heapsnapshot> [N]
 */
import { readFileSync } from 'node:fs';

interface Snapshot {
  snapshot: { meta: { node_fields: string[]; node_types: [string[]]; edge_fields: string[]; edge_types: [string[]] } };
  nodes: number[];
  edges: (number | string)[];
  strings: string[];
}

const [file, topArg = '20'] = process.argv.slice(2);
if (!file) {
  process.stderr.write('usage: heap-snapshot-report.ts <file.heapsnapshot> [N]\n');
  process.exit(2);
}
const top = Number(topArg);
const { snapshot, nodes, edges, strings } = JSON.parse(readFileSync(file, 'utf8')) as Snapshot;
const {
  node_fields: nodeFields,
  node_types: [nodeTypes],
  edge_fields: edgeFields,
  edge_types: [edgeTypes],
} = snapshot.meta;
const field = (fields: string[], name: string): number => fields.indexOf(name);
const [T, NAME, SIZE, EDGES] = [
  field(nodeFields, 'type'),
  field(nodeFields, 'name'),
  field(nodeFields, 'self_size'),
  field(nodeFields, 'edge_count'),
];
const [ET, EN] = [field(edgeFields, 'type'), field(edgeFields, 'name_or_index')];
const add = (table: Map<string, [number, number]>, key: string, size: number): void => {
  const entry = table.get(key) ?? [0, 0];
  entry[0] += size;
  entry[1]++;
  table.set(key, entry);
};
const byKind = new Map<string, [number, number]>();
const objects = new Map<string, [number, number]>();
const texts = new Map<string, [number, number]>();
let total = 0;
for (let i = 0, e = 0; i < nodes.length; i += nodeFields.length) {
  const type = nodeTypes[nodes[i + T] as number] as string;
  const name = strings[nodes[i + NAME] as number] as string;
  const size = nodes[i + SIZE] as number;
  const edgeCount = nodes[i + EDGES] as number;
  total += size;
  if (type.endsWith('string')) {
    add(byKind, '(string)', size);
    add(texts, name.replace(/\d+/g, '#').slice(0, 50), size);
  } else add(byKind, type === 'object' || type === 'closure' ? name : `(${type})`, size);
  if (type === 'object' && name === 'Object') {
    const keys: string[] = [];
    for (let k = 0; k < edgeCount && keys.length < 8; k++) {
      const at = e + k * edgeFields.length;
      const key = strings[edges[at + EN] as number] as string;
      if (edgeTypes[edges[at + ET] as number] === 'property' && key !== '__proto__') keys.push(key);
    }
    add(objects, keys.join(','), size);
  }
  e += edgeCount * edgeFields.length;
}
const mb = (bytes: number): string => (bytes / 2 ** 20).toFixed(1).padStart(7);
const print = (title: string, table: Map<string, [number, number]>): void => {
  process.stdout.write(`${title} (MB, count):\n`);
  for (const [key, [size, count]] of [...table].sort((a, b) => b[1][0] - a[1][0]).slice(0, top))
    process.stdout.write(`${mb(size)} ${String(count).padStart(9)}  ${JSON.stringify(key)}\n`);
};
process.stdout.write(`${mb(total).trim()} MB in all\n`);
print('by kind', byKind);
print('plain objects by their first properties', objects);
print('strings by shape', texts);
