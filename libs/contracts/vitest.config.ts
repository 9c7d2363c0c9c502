import { projectConfig } from '../../vitest.shared.ts';

export default projectConfig('contracts', import.meta.dirname);
