// Says which Node.js the repository needs and how to get it, when the `node` running this is
// older than the root package.json's "engines" (instead of the type stripper's
// ERR_UNKNOWN_FILE_EXTENSION, or a dependency's stack trace, further on).
//   node scripts/check-node.cjs      silent, exit 0 on a Node recent enough; else the message, exit 2
// npm runs it before `npm ci` / `npm install` (preinstall: npm runs it after installing the
// dependencies), `npm start`, `npm test`, the benches and `npm run chaos`; the `tickwarden` bin
// requires it. CommonJS in the syntax of old Node versions (10 and later; no `?.`, `??`): it must
// run on the Node it refuses.
'use strict';

const fs = require('fs');
const path = require('path');

const ROOT = path.join(__dirname, '..');

function read(file) {
  try {
    return fs.readFileSync(path.join(ROOT, file), 'utf8');
  } catch {
    return undefined;
  }
}

/** [major, minor, patch] of the first version in `text` ("v20.20.2", ">=22.22", "24"), or undefined. */
function parseVersion(text) {
  const match = /(\d+)(?:\.(\d+))?(?:\.(\d+))?/.exec(text || '');
  return match ? [Number(match[1]), Number(match[2] || 0), Number(match[3] || 0)] : undefined;
}

function older(version, than) {
  for (let i = 0; i < 3; i++) if (version[i] !== than[i]) return version[i] < than[i];
  return false;
}

/** What the repository asks for: `engines.node` of the root package.json (`>=X.Y`) and the version `.nvmrc` names. */
function requirement() {
  let engines;
  try {
    engines = JSON.parse(read('package.json') || '{}').engines;
  } catch {
    engines = undefined;
  }
  const range = engines && typeof engines.node === 'string' ? engines.node.trim() : '>=22.22';
  const recommended = (read('.nvmrc') || '').trim() || '24';
  return { range: range, minimum: parseVersion(range) || [22, 22, 0], recommended: recommended };
}

/**
 * Undefined when `nodeVersion` (default: this process's) meets the requirement; otherwise the
 * message for the user, naming the version needed and the ways to get it.
 */
function nodeProblem(nodeVersion, execPath) {
  const version = nodeVersion || process.version;
  const running = parseVersion(version);
  const need = requirement();
  if (running && !older(running, need.minimum)) return undefined;
  const tools = path.join(ROOT, '.tools');
  return [
    'tickwarden needs Node.js ' +
      need.range +
      ' (package.json "engines"; .nvmrc: ' +
      need.recommended +
      '), but this is Node.js ' +
      version +
      ' (' +
      (execPath || process.execPath) +
      ').',
    'Get Node.js ' + need.recommended + ', then run the command again:',
    '  with nvm:       nvm install && nvm use      (in ' + ROOT + ': nvm reads .nvmrc)',
    '  with npm alone: npm install --no-save --no-package-lock --prefix ' + tools + ' node@' + need.recommended,
    '                  export PATH="' + path.join(tools, 'node_modules', '.bin') + ':$PATH"',
    '                  (the Node.js build from the npm registry, into .tools/: what CI does, see .ci/run)',
    '  or an installer or package from https://nodejs.org/en/download',
    '',
  ].join('\n');
}

module.exports = { nodeProblem: nodeProblem, requirement: requirement };

if (require.main === module) {
  const problem = nodeProblem();
  if (problem) {
    process.stderr.write(problem);
    process.exit(2);
  }
}
