import { projectConfig } from '../../vitest.shared.ts';

export default projectConfig('config', import.meta.dirname);
