// The build (`npm run build`), in two parts that need nothing of each other:
// - the code, by esbuild (about 1 s): the library's modules one for one (dist/**/*.js, what the package's
//   `wxhooks` entry loads), then the bundles (scripts/bundle.js: the CLI, the inspector page, wxhooks/web;
//   scripts/bundle-relay.js: the relay's Worker);
// - the declarations, by tsc (about 12 s on this project's 2 cores, most of it the type check of src/ that
//   writing them needs): dist/**/*.d.ts.
// `node scripts/build.js` empties dist/ and builds both; `--code` or `--types` builds one into dist/ as it
// is (scripts/checks.js empties it, runs the two side by side, and starts the tests once the code is built).
// The modules are transpiled file by file, as tsc would emit them: the sources keep to what that allows
// (isolatedModules in tsconfig.json: a type is imported and exported as a type).
import { execFileSync } from 'node:child_process';
import { readdirSync, rmSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

const ROOT = resolve(import.meta.dirname, '..');

/** Empties dist/: the files of an earlier build (a module since moved or removed) would be packed. */
export function clean() {
  rmSync(join(ROOT, 'dist'), { recursive: true, force: true });
}

/** The library's modules, one for one: src/**\/*.ts (not the page, which is bundled) to dist/**\/*.js. */
async function modules() {
  const { build } = await import('esbuild');
  const entryPoints = readdirSync(join(ROOT, 'src'), { recursive: true })
    .filter((f) => f.endsWith('.ts') && !f.endsWith('.d.ts') && !f.startsWith('page/'))
    .map((f) => join(ROOT, 'src', f));
  await build({
    entryPoints,
    outdir: join(ROOT, 'dist'),
    outbase: join(ROOT, 'src'),
    bundle: false,
    format: 'esm',
    platform: 'node',
    target: 'node20',
    tsconfig: join(ROOT, 'tsconfig.json'),
    logLevel: 'warning',
  });
}

export async function buildCode() {
  await modules();
  await import('./bundle.js');
  await import('./bundle-relay.js');
}

export function buildTypes() {
  execFileSync(join(ROOT, 'node_modules', '.bin', 'tsc'), ['-p', 'tsconfig.json', '--emitDeclarationOnly'], { cwd: ROOT, stdio: 'inherit' });
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) {
  const only = process.argv[2];
  if (only !== undefined && only !== '--code' && only !== '--types') {
    process.stderr.write(`scripts/build.js: unknown option ${only} (--code or --types, or neither for both)\n`);
    process.exit(2);
  }
  try {
    if (only === undefined) clean();
    if (only !== '--types') await buildCode();
    if (only !== '--code') buildTypes();
  } catch (err) {
    // tsc has said its errors (stdio inherited), esbuild its own
    if (!(err && typeof err === 'object' && 'status' in err)) process.stderr.write(`${err instanceof Error ? err.message : err}\n`);
    process.exit(1);
  }
}
