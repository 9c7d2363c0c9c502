import { createHash } from 'node:crypto';
import { readFile, readdir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { sortErrors } from './errors.ts';
import { httpDestinationErrors, type HttpDestinations } from './http-destinations.ts';
import type { ConfigError, ConfigResult } from './types.ts';
import { MAX_FILE_BYTES } from './limits.ts';
import { fileTooLarge, validateConfigTexts, type ConfigText } from './validate.ts';

const YAML_FILE = /\.ya?ml$/;

/**
 * Loads and validates the configuration at `path`: one YAML file, or a directory whose `*.yaml` and
 * `*.yml` files (one per team) form one configuration. In a directory only regular files directly
 * inside it count (a symlink to a file is followed); dotfiles and directories are ignored, which
 * skips the `..data` and `..2024_01_01_...` entries of a Kubernetes ConfigMap volume while reading
 * its `team.yaml -> ..data/team.yaml` links. Files are read in name order. Every error of every
 * file is reported; unreadable files and an empty directory are errors at line 1, column 1.
 * With `httpDestinations`, an http schedule whose URL the policy refuses is an error at its `url`.
 */
export async function loadConfig(
  path: string,
  options: { httpDestinations?: HttpDestinations | undefined } = {},
): Promise<ConfigResult> {
  const read = await readConfigFiles(path);
  if (!read.ok) return read;
  return finishConfig(validateConfigTexts(read.texts), read, options.httpDestinations);
}

/** A configuration's files as read: the texts of those that could be read (and their digests), and an error for each other one. */
export interface ConfigFiles {
  ok: true;
  files: string[];
  texts: ConfigText[];
  /** [file, SHA-256 of its text] for each text read (TickwardenConfig.digests). */
  digests: [string, string][];
  readErrors: ConfigError[];
}

/** Reads the configuration at `path` as `loadConfig` does; fails (an error at 1:1) when there is no file to read. */
export async function readConfigFiles(path: string): Promise<ConfigFiles | { ok: false; errors: ConfigError[] }> {
  let files: string[];
  try {
    const stats = await stat(path);
    if (stats.isDirectory()) files = await yamlFilesIn(path);
    else if (stats.isFile()) files = [path];
    else return failure([fileError(path, 'expected a YAML file or a directory of YAML files')]);
  } catch (error) {
    return failure([fileError(path, `cannot read the configuration: ${reason(error)}`)]);
  }
  if (files.length === 0) return failure([fileError(path, 'no *.yaml or *.yml files in this directory')]);

  const texts: ConfigText[] = [];
  const readErrors: ConfigError[] = [];
  for (const file of files) {
    try {
      // A file past the limit is not even read: its text alone could exhaust the memory.
      const { size } = await stat(file);
      if (size > MAX_FILE_BYTES) readErrors.push(fileTooLarge(file, size));
      else texts.push({ file, text: await readFile(file, 'utf8') });
    } catch (error) {
      readErrors.push(fileError(file, `cannot read the file: ${reason(error)}`));
    }
  }
  const digests = texts.map(({ file, text }): [string, string] => [file, textDigest(text)]);
  return { ok: true, files, texts, digests, readErrors };
}

/** The validated texts' result with the files that could not be read and, on a valid config, the http destination policy. */
export function finishConfig(
  result: ConfigResult,
  read: ConfigFiles,
  httpDestinations: HttpDestinations | undefined,
): ConfigResult {
  const policyErrors = result.ok && httpDestinations ? httpDestinationErrors(result.config, httpDestinations) : [];
  if (read.readErrors.length === 0 && policyErrors.length === 0)
    return result.ok ? { ok: true, config: { ...result.config, digests: new Map(read.digests) } } : result;
  return failure(sortErrors([...read.readErrors, ...policyErrors, ...(result.ok ? [] : result.errors)], read.files));
}

async function yamlFilesIn(directory: string): Promise<string[]> {
  const entries = await readdir(directory, { withFileTypes: true });
  const files: string[] = [];
  for (const entry of entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))) {
    if (entry.name.startsWith('.') || !YAML_FILE.test(entry.name)) continue;
    const file = join(directory, entry.name);
    if (entry.isFile()) files.push(file);
    else if (entry.isSymbolicLink()) {
      // follow it; a link to a directory is skipped, a dangling link is reported when read
      const target = await stat(file).catch(() => undefined);
      if (target === undefined || target.isFile()) files.push(file);
    }
  }
  return files;
}

const textDigest = (text: string): string => createHash('sha256').update(text).digest('base64url');

const failure = (errors: ConfigError[]): { ok: false; errors: ConfigError[] } => ({ ok: false, errors });

const fileError = (file: string, message: string): ConfigError => ({ file, line: 1, column: 1, path: [], message });

function reason(error: unknown): string {
  const code = typeof error === 'object' && error !== null && 'code' in error ? String(error.code) : undefined;
  if (code === 'ENOENT') return 'no such file or directory';
  if (code === 'EACCES') return 'permission denied';
  return error instanceof Error ? error.message : String(error);
}
