import type { HttpDestinations, ScheduleConfig } from '@tickwarden/config';
import { runCommand } from './command.ts';
import type { CommandRunOptions } from './guarded-program.ts';
import { runHttp } from './http.ts';
import { runModule } from './module.ts';
import type { RunContext, RunDetails } from '../run-context.ts';

export { LEASE_ENDING_BEFORE_START } from './guarded-program.ts';

/** What every handler kind may need: a command's options, and where http handlers may connect. */
export interface HandlerOptions extends CommandRunOptions {
  httpDestinations?: HttpDestinations | undefined;
}

/** Runs the schedule's handler once for `context`; resolves with details for the log, rejects on failure or abort. */
export function runHandler(
  schedule: Pick<ScheduleConfig, 'handler' | 'source'>,
  context: RunContext,
  options: HandlerOptions,
): Promise<RunDetails> {
  const { handler } = schedule;
  switch (handler.kind) {
    case 'http':
      return runHttp(handler, context, options);
    case 'command':
      return runCommand(handler, context, options);
    case 'module':
      return runModule(handler, context, schedule.source.file, options);
  }
}
