import * as z from 'zod';
import { fileSchema } from './schema.ts';

/** Where the generated schema is checked in, relative to libs/config (the modelines in examples/ point at it). */
export const TEAM_SCHEMA_FILE = 'tickwarden-team.schema.json';

/** The command that regenerates the checked-in schema (from the repository root). */
export const TEAM_SCHEMA_COMMAND = 'npm run schema';

/**
 * The JSON Schema (draft-07, the draft the YAML language server of VS Code and other editors
 * supports fully) of one team file as a team writes it: zod's conversion of `fileSchema` with
 * `io: 'input'`, so durations are strings with a pattern and defaults are written as a team would
 * write them (`30s`). Descriptions, examples and the patterns zod cannot derive (a duration's
 * syntax, whose check is a transform; the scheme of a URL, whose check is a refinement) come from
 * the `.meta()` of schema.ts. The schema accepts every file `tickwarden validate` accepts; the
 * checks it cannot express (cron expressions, time zones, duration bounds, the payload's size, the
 * exponential backoff bound, unique names) are left to the validator and named in the
 * descriptions.
 */
export function teamFileJsonSchema(): Record<string, unknown> {
  // unrepresentable: 'throw' so that a part of the input the conversion cannot describe fails here, not in an editor.
  const { $schema, title, description, ...rest } = z.toJSONSchema(fileSchema, {
    target: 'draft-07',
    io: 'input',
    unrepresentable: 'throw',
  });
  return {
    $schema,
    $comment: `Generated from libs/config/src/schema.ts by ${TEAM_SCHEMA_COMMAND}: do not edit. tickwarden validate has the last word.`,
    title,
    description,
    ...rest,
  };
}

/** The checked-in file's content: the schema as JSON, two-space indented, with a final newline. */
export function teamFileJsonSchemaText(): string {
  return `${JSON.stringify(teamFileJsonSchema(), null, 2)}\n`;
}
