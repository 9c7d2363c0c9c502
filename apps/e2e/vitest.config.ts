import { projectConfig } from '../../vitest.shared.ts';

export default projectConfig('e2e', import.meta.dirname);
