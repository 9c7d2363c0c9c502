import { projectConfig } from '../../vitest.shared.ts';

// Two files at once: most of this suite waits on timers (ticks, lease TTLs), and one file at a time
// made it the longest task of `npm test`, which the e2e suite (run alone) can only follow.
export default projectConfig('scheduler', import.meta.dirname, 2);
