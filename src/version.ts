import { readFileSync } from 'node:fs';

// Set by the bundler (scripts/bundle.js); the unbundled build reads package.json.
declare const __WXHOOKS_VERSION__: string | undefined;

let cached: string | undefined;

/** The package version, read once from package.json (cheaper than importing JSON). */
export function version(): string {
  if (typeof __WXHOOKS_VERSION__ === 'string') return __WXHOOKS_VERSION__;
  cached ??= (JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }).version;
  return cached;
}

export function userAgent(): string {
  return `wxhooks/${version()} node/${process.versions.node}`;
}
