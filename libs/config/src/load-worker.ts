/**
 * The worker thread of `loadConfigOffThread`: reads the configuration at `workerData.path` and
 * checks its files one by one, posting each file's check as it is done (load-off-thread.ts).
 */
import { parentPort, workerData } from 'node:worker_threads';
import { readConfigFiles } from './load.ts';
import { SCHEDULES_PER_MESSAGE, type LoadMessage } from './load-off-thread.ts';
import { checkFile } from './validate.ts';

const port = parentPort;
if (port === null) throw new Error('load-worker.ts runs as a worker thread (loadConfigOffThread)');
const post = (message: LoadMessage): void => port.postMessage(message);

const read = await readConfigFiles((workerData as { path: string }).path);
if (!read.ok) post({ kind: 'failed', errors: read.errors });
else {
  // The texts stay here: the caller needs only the file names and read errors.
  post({ kind: 'read', read: { ...read, texts: [] } });
  for (const { file, text } of read.texts) {
    const { schedules, ...check } = checkFile(text, file);
    for (let from = 0; from < schedules.length; from += SCHEDULES_PER_MESSAGE)
      post({ kind: 'schedules', json: JSON.stringify(schedules.slice(from, from + SCHEDULES_PER_MESSAGE)) });
    post({ kind: 'file', file, json: JSON.stringify(check) });
  }
  post({ kind: 'done' });
}
