import type { ScheduleConfig } from '@tickwarden/config';

/**
 * What the scheduler needs of a schedule: the config's ScheduleConfig without the handler (the
 * workers run it) and its source, so a loaded config can be passed as is.
 */
export type Schedule = Omit<ScheduleConfig, 'team' | 'name' | 'handler' | 'source'>;
