import { projectConfig } from '../../vitest.shared.ts';

export default projectConfig('worker', import.meta.dirname);
