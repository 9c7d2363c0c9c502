// Writes the team file's JSON Schema, generated from the zod schema, to libs/config/tickwarden-team.schema.json
// (`npm run schema` from the repository root). With --check it writes nothing and exits 1 when the
// checked-in file differs from what the generator produces now (test/json-schema.test.ts checks the same in CI).
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { TEAM_SCHEMA_COMMAND, TEAM_SCHEMA_FILE, teamFileJsonSchemaText } from '../src/json-schema.ts';

const file = path.join(import.meta.dirname, '..', TEAM_SCHEMA_FILE);
const relative = path.relative(process.cwd(), file);
const text = teamFileJsonSchemaText();
const check = process.argv.includes('--check');

let current: string | undefined;
try {
  current = readFileSync(file, 'utf8');
} catch {
  current = undefined;
}

if (check) {
  if (current === text) console.log(`${relative} is current`);
  else {
    console.error(
      `${relative} is ${current === undefined ? 'missing' : 'not what the generator produces now'}: run ${TEAM_SCHEMA_COMMAND} and commit it`,
    );
    process.exitCode = 1;
  }
} else if (current === text) console.log(`${relative} is current (${Buffer.byteLength(text)} bytes)`);
else {
  writeFileSync(file, text);
  console.log(`wrote ${relative} (${Buffer.byteLength(text)} bytes)`);
}
