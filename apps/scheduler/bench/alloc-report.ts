/**
 * Prints the bytes allocated in a profile written by alloc-sampler.ts, in all and by allocation
 * site (function, file and line; the top N, default 15).
 *
 *   node apps/scheduler/bench/alloc-report.ts /tmp/alloc/alloc-<pid>.heapprofile [N]
 */
import { readFileSync } from 'node:fs';

interface ProfileNode {
  callFrame: { functionName: string; url: string; lineNumber: number };
  selfSize: number;
  children: ProfileNode[];
}

const [file, top = '15'] = process.argv.slice(2);
if (!file) {
  process.stderr.write('usage: alloc-report.ts <alloc-<pid>.heapprofile> [N]\n');
  process.exit(2);
}
const { head } = JSON.parse(readFileSync(file, 'utf8')) as { head: ProfileNode };
const bySite = new Map<string, number>();
let total = 0;
const pending = [head];
for (let node = pending.pop(); node; node = pending.pop()) {
  const { functionName, url, lineNumber } = node.callFrame;
  const site = `${functionName || '(anonymous)'} ${url.split('/').slice(-3).join('/')}:${lineNumber + 1}`;
  bySite.set(site, (bySite.get(site) ?? 0) + node.selfSize);
  total += node.selfSize;
  pending.push(...node.children);
}
const mb = (bytes: number): string => (bytes / 1e6).toFixed(1).padStart(7);
process.stdout.write(`${file}: ${mb(total).trim()} MB allocated\n`);
for (const [site, bytes] of [...bySite].sort((a, b) => b[1] - a[1]).slice(0, Number(top)))
  process.stdout.write(`${mb(bytes)} MB ${((100 * bytes) / total).toFixed(1).padStart(5)} %  ${site}\n`);
