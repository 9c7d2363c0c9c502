/**
 * The worker thread of `loadConfigOffThread`: reads the configuration at `workerData.path` and
 * checks its files one by one, posting each file's schedules as it is done (or, for a file whose
 * text has the digest in `workerData.known`, that it is unchanged, without parsing it), then the
 * errors of the whole configuration (load-off-thread.ts).
 */
import { parentPort, workerData } from 'node:worker_threads';
import { readConfigFiles } from './load.ts';
import { ENTRIES_PER_MESSAGE, type LoadMessage, type LoadWorkerData } from './load-off-thread.ts';
import { MAX_SCHEDULES } from './limits.ts';
import { ConfigAssembler, checkFile, type FileCheck } from './validate.ts';

const port = parentPort;
if (port === null) throw new Error('load-worker.ts runs as a worker thread (loadConfigOffThread)');
const post = (message: LoadMessage): void => port.postMessage(message);

function postSlices(list: 'schedules' | 'errors', entries: readonly unknown[]): void {
  for (let from = 0; from < entries.length; from += ENTRIES_PER_MESSAGE)
    post({ kind: 'slice', list, json: JSON.stringify(entries.slice(from, from + ENTRIES_PER_MESSAGE)) });
}

const { path, known } = workerData as LoadWorkerData;
/** The previous config's files by name: digest, schedule count and the `team/name` ids each defines. */
const previous = new Map(known.map(({ file, ...rest }) => [file, rest]));
const read = await readConfigFiles(path);
if (!read.ok) post({ kind: 'failed', errors: read.errors });
else {
  // The texts stay here: the caller needs only the file names and read errors.
  post({ kind: 'read', read: { ...read, texts: [] } });
  // A file whose text the previous (valid) config was loaded from is not parsed again: the caller
  // has its schedules. The changed files are checked and assembled; if one of them defines an id
  // an unchanged file defines too, or the total passes the limit, the configuration is invalid
  // and every file is checked, so that its errors are exactly those of a load from scratch.
  const changed = new ConfigAssembler();
  const checks = new Map<string, FileCheck>();
  const unchangedIds = new Set<string>();
  let unchangedCount = 0;
  let changedCount = 0;
  for (const [i, { file, text }] of read.texts.entries()) {
    const before = previous.get(file);
    if (before !== undefined && before.digest === read.digests[i]?.[1]) {
      post({ kind: 'unchanged', file });
      for (const id of before.ids.split('\n')) if (id !== '') unchangedIds.add(id);
      unchangedCount += before.count;
      continue;
    }
    const { schedules, ...check } = checkFile(text, file);
    postSlices('schedules', schedules);
    const kept = { ...check, schedules: [] };
    checks.set(file, kept);
    changed.add(file, kept);
    changedCount += check.scheduleCount;
  }
  const files = read.texts.map((text) => text.file);
  const collides = [...checks.values()].some((check) => check.identities.some(({ id }) => unchangedIds.has(id)));
  let result = changed.result(files);
  if (collides || unchangedCount + changedCount > MAX_SCHEDULES) {
    const all = new ConfigAssembler();
    for (const { file, text } of read.texts)
      all.add(file, checks.get(file) ?? { ...checkFile(text, file), schedules: [] });
    result = all.result(files);
  }
  if (!result.ok) postSlices('errors', result.errors);
  post({ kind: 'done', files });
}
