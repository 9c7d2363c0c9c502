import type { ScheduleConfig } from '@tickwarden/config';
import { runCommand, type CommandRunOptions } from './command.ts';
import { runHttp } from './http.ts';
import { runModule } from './module.ts';
import type { RunContext, RunDetails } from './types.ts';

/** Runs the schedule's handler once for `context`; resolves with details for the log, rejects on failure or abort. */
export function runHandler(schedule: Pick<ScheduleConfig, 'handler' | 'source'>, context: RunContext, options: CommandRunOptions): Promise<RunDetails> {
  const { handler } = schedule;
  switch (handler.kind) {
    case 'http':
      return runHttp(handler, context);
    case 'command':
      return runCommand(handler, context, options);
    case 'module':
      return runModule(handler, context, schedule.source.file, options.limits);
  }
}
