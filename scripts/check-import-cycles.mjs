// Fails (exit 1) when a module imports itself through others, within a project's `src` (type
// imports count: a cycle of types is a tangle of concepts all the same). Nx's module-boundary rule
// catches cycles between projects; this catches them inside one. Part of `npm test`.
// Relative imports only, as the house writes them: `from './x.ts'`, `import('./x.ts')`.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';

const ROOTS = ['apps', 'libs'];
const IMPORT = /(?:^|\n)\s*(?:import|export)\s[^;]*?from\s+'(\.{1,2}\/[^']+)'|import\(\s*'(\.{1,2}\/[^']+)'\s*\)/g;

/** Every .ts file under `dir`. */
function files(dir) {
  return readdirSync(dir).flatMap((name) => {
    const file = path.join(dir, name);
    return statSync(file).isDirectory() ? files(file) : file.endsWith('.ts') ? [file] : [];
  });
}

const sources = ROOTS.flatMap((root) => readdirSync(root).map((project) => path.join(root, project, 'src'))).filter(
  (dir) => statSync(dir, { throwIfNoEntry: false })?.isDirectory(),
);
const graph = new Map();
for (const file of sources.flatMap(files)) {
  const imports = [];
  for (const match of readFileSync(file, 'utf8').matchAll(IMPORT))
    imports.push(path.join(path.dirname(file), match[1] ?? match[2]));
  graph.set(file, imports);
}

// Tarjan's strongly connected components: each component of more than one module is a cycle.
const index = new Map();
const low = new Map();
const stack = [];
const onStack = new Set();
const cycles = [];
let next = 0;
function visit(file) {
  index.set(file, next);
  low.set(file, next++);
  stack.push(file);
  onStack.add(file);
  for (const target of graph.get(file) ?? []) {
    if (!graph.has(target)) continue;
    if (!index.has(target)) {
      visit(target);
      low.set(file, Math.min(low.get(file), low.get(target)));
    } else if (onStack.has(target)) low.set(file, Math.min(low.get(file), index.get(target)));
  }
  if (low.get(file) !== index.get(file)) return;
  const component = [];
  let member;
  do {
    member = stack.pop();
    onStack.delete(member);
    component.push(member);
  } while (member !== file);
  if (component.length > 1 || (graph.get(file) ?? []).includes(file)) cycles.push(component.sort());
}
for (const file of graph.keys()) if (!index.has(file)) visit(file);

if (cycles.length > 0) {
  for (const cycle of cycles) process.stderr.write(`import cycle: ${cycle.join(' <-> ')}\n`);
  process.exit(1);
}
process.stdout.write(`no import cycles in ${graph.size} modules\n`);
