import { projectConfig } from '../../vitest.shared.ts';

export default projectConfig('deploy-k8s', import.meta.dirname);
