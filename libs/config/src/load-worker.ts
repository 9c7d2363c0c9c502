/**
 * The worker thread of `loadConfigOffThread`: reads the configuration at `workerData.path` and
 * checks its files one by one, posting each file's schedules as it is done (or, for a file whose
 * text has the digest in `workerData.known`, that it is unchanged), then the errors of the whole
 * configuration (load-off-thread.ts).
 */
import { parentPort, workerData } from 'node:worker_threads';
import { readConfigFiles } from './load.ts';
import { ENTRIES_PER_MESSAGE, type LoadMessage, type LoadWorkerData } from './load-off-thread.ts';
import { ConfigAssembler, checkFile } from './validate.ts';

const port = parentPort;
if (port === null) throw new Error('load-worker.ts runs as a worker thread (loadConfigOffThread)');
const post = (message: LoadMessage): void => port.postMessage(message);

function postSlices(list: 'schedules' | 'errors', entries: readonly unknown[]): void {
  for (let from = 0; from < entries.length; from += ENTRIES_PER_MESSAGE)
    post({ kind: 'slice', list, json: JSON.stringify(entries.slice(from, from + ENTRIES_PER_MESSAGE)) });
}

const { path, known } = workerData as LoadWorkerData;
const unchanged = new Map(known);
const read = await readConfigFiles(path);
if (!read.ok) post({ kind: 'failed', errors: read.errors });
else {
  // The texts stay here: the caller needs only the file names and read errors.
  post({ kind: 'read', read: { ...read, texts: [] } });
  // The assembler keeps what the checks across files need; the schedules go as soon as they are checked.
  const config = new ConfigAssembler();
  for (const [i, { file, text }] of read.texts.entries()) {
    const { schedules, ...check } = checkFile(text, file);
    // Checked all the same: the checks across files need every file's schedules.
    if (check.errors.length === 0 && unchanged.get(file) === read.digests[i]?.[1]) post({ kind: 'unchanged', file });
    else postSlices('schedules', schedules);
    config.add(file, { ...check, schedules: [] });
  }
  const files = read.texts.map((text) => text.file);
  const result = config.result(files);
  if (!result.ok) postSlices('errors', result.errors);
  post({ kind: 'done', files });
}
