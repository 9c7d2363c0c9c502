/**
 * The kit's reaper: a detached sidecar that outlives the test process. It reads
 * registrations on stdin, one per line:
 *   pid <pid> <starttime> | unpid <pid> | container <id> | uncontainer <id> | dir <path> | undir <path>
 * When stdin closes (the test process exited, was killed or crashed), it
 * kills every registered process by PID (checking its start time), removes
 * every registered container through the Docker API, deletes the directories,
 * and exits. Nothing is matched by name.
 */
import { rmSync } from 'node:fs';
import http from 'node:http';
import readline from 'node:readline';
import { processStartTime } from './process-start-time.ts';

const pids = new Map<number, string>();
const containers = new Set<string>();
const dirs = new Set<string>();

function removeContainer(id: string): Promise<void> {
  const host = process.env['DOCKER_HOST'] ?? 'unix:///var/run/docker.sock';
  if (!host.startsWith('unix://')) return Promise.resolve();
  return new Promise((resolve) => {
    const request = http.request(
      { socketPath: host.slice('unix://'.length), method: 'DELETE', path: `/containers/${id}?force=true&v=true` },
      (response) => {
        response.resume();
        response.on('end', resolve);
      },
    );
    request.setTimeout(10_000, () => request.destroy());
    request.on('error', () => resolve());
    request.end();
  });
}

async function reap(): Promise<void> {
  for (const [pid, startTime] of pids) {
    if (processStartTime(pid) === startTime) process.kill(pid, 'SIGKILL');
  }
  await Promise.all([...containers].map(removeContainer));
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  process.exit(0);
}

const lines = readline.createInterface({ input: process.stdin });
lines.on('line', (line) => {
  const [verb, arg, extra] = line.trim().split(' ');
  if (!arg) return;
  if (verb === 'pid' && extra) pids.set(Number(arg), extra);
  else if (verb === 'unpid') pids.delete(Number(arg));
  else if (verb === 'container') containers.add(arg);
  else if (verb === 'uncontainer') containers.delete(arg);
  else if (verb === 'dir') dirs.add(arg);
  else if (verb === 'undir') dirs.delete(arg);
});
lines.on('close', () => void reap());
// The parent may die before we even read: SIGHUP/SIGPIPE must not kill the reaper first.
process.on('SIGHUP', () => undefined);
process.on('SIGINT', () => undefined);
process.on('SIGTERM', () => undefined);
