import { projectConfig } from '../../vitest.shared.ts';

export default projectConfig('runtime', import.meta.dirname);
