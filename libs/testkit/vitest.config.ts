import { projectConfig } from '../../vitest.shared.ts';

export default projectConfig('testkit', import.meta.dirname);
