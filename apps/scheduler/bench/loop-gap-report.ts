/**
 * What held an event loop: for each gap loop-gap-sampler.ts noted (optionally only those ending
 * between two wall times), the functions on the stack of the CPU profile's samples inside it,
 * with the share of the gap's samples each appears in (the frames of the loop itself left out).
 * A gap with few samples for its length was mostly waiting for a core.
 *
 *   node apps/scheduler/bench/loop-gap-report.ts <gaps-<pid>.json> <CPU.*.<pid>.0.001.cpuprofile> [from ISO] [to ISO]
 */
import { readFileSync } from 'node:fs';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}

const [gapsFile, profileFile, from, to] = process.argv.slice(2);
if (!gapsFile || !profileFile) {
  process.stderr.write('usage: loop-gap-report.ts <gaps.json> <cpuprofile> [from ISO] [to ISO]\n');
  process.exit(2);
}
const gaps = JSON.parse(readFileSync(gapsFile, 'utf8')) as [number, number, number][];
const profile = JSON.parse(readFileSync(profileFile, 'utf8')) as {
  nodes: ProfileNode[];
  startTime: number;
  samples: number[];
  timeDeltas: number[];
};
const byId = new Map(profile.nodes.map((node) => [node.id, node]));
const parent = new Map<number, number>();
for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id);
const frame = (id: number): string => {
  const { functionName, url, lineNumber } = (byId.get(id) as ProfileNode).callFrame;
  return `${functionName || '(anonymous)'} ${url.split('/').at(-1) ?? ''}:${lineNumber}`;
};
const LOOP_FRAMES =
  /^\((root|program)\)|^\(anonymous\) :-1|processTicksAndRejections|runMicrotasks|processImmediate|listOnTimeout|processTimers/;
const times: number[] = [];
let time = profile.startTime;
for (const delta of profile.timeDeltas) times.push((time += delta));
const [fromMs, toMs] = [from ? Date.parse(from) : -Infinity, to ? Date.parse(to) : Infinity];
for (const [startUs, endUs, wallMs] of gaps) {
  if (wallMs < fromMs || wallMs > toMs) continue;
  const onStack = new Map<string, number>();
  let samples = 0;
  profile.samples.forEach((sample, i) => {
    if ((times[i] as number) < startUs || (times[i] as number) > endUs) return;
    samples++;
    const seen = new Set<string>();
    for (let id: number | undefined = sample; id !== undefined; id = parent.get(id)) seen.add(frame(id));
    for (const name of seen) onStack.set(name, (onStack.get(name) ?? 0) + 1);
  });
  const top = [...onStack]
    .filter(([name]) => !LOOP_FRAMES.test(name))
    .sort((a, b) => b[1] - a[1])
    .slice(0, 6)
    .map(([name, count]) => `${name} ${Math.round((100 * count) / Math.max(samples, 1))} %`);
  process.stdout.write(
    `${new Date(wallMs).toISOString()} held ${Math.round((endUs - startUs) / 1000)} ms, ${samples} samples: ${top.join(' | ')}\n`,
  );
}
