// Bundles the CLI (our code, commander and chalk) into dist/bin/, split at each lazy import, so
// `wxhooks --version` and `--help` load a few files instead of dozens. The heavy dependencies that
// only some commands need (undici, conf, ora, ...) stay outside and are loaded when used.
import { build } from 'esbuild';
import { readFileSync } from 'node:fs';

const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8'));

await build({
  entryPoints: [new URL('../src/cli.ts', import.meta.url).pathname],
  outdir: new URL('../dist/bin', import.meta.url).pathname,
  bundle: true,
  splitting: true,
  format: 'esm',
  platform: 'node',
  target: 'node20',
  external: ['undici', 'conf', 'ora', 'proper-lockfile', 'bytes', 'env-paths'],
  define: { __WXHOOKS_VERSION__: JSON.stringify(pkg.version) },
  // commander is CommonJS: give the bundle a require of its own
  banner: { js: "import { createRequire as __wxCreateRequire } from 'node:module'; const require = __wxCreateRequire(import.meta.url);" },
  logLevel: 'warning',
});
