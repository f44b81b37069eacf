import type { BuildOptions } from 'esbuild';
export const WEB_BUNDLE: BuildOptions;
