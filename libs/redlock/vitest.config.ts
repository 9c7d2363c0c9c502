import { projectConfig } from '../../vitest.shared.ts';

export default projectConfig('redlock', import.meta.dirname);
