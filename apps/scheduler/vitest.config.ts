import { projectConfig } from '../../vitest.shared.ts';

export default projectConfig('scheduler', import.meta.dirname);
