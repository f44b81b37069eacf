// A single executable for this platform, with Node's single executable applications (SEA): the CLI
// bundled by esbuild into one CommonJS file (its lazy imports inlined: SEA runs one script, and its
// require reaches only Node's own modules), made into a preparation blob by this node, and injected with
// postject into a copy of this node binary. `npm run sea` writes dist/sea/wxhooks; the tests build one
// into a folder of their own (buildSea). What it lacks, said in DECISIONS.md: `listen --inspect` (the
// page is a file beside the bundle) and the pre-rendered help (commander renders it, as from a tsc build).
import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const ROOT = new URL('..', import.meta.url).pathname;

/** Builds the executable into `dir` (made if needed) and returns its path. */
export async function buildSea(dir = join(ROOT, 'dist/sea')) {
  const { build } = await import('esbuild');
  const { inject } = await import('postject');
  const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8'));
  mkdirSync(dir, { recursive: true });
  const script = join(dir, 'wxhooks.cjs');
  await build({
    stdin: { contents: "import { run } from './src/cli.ts';\nvoid run();\n", resolveDir: ROOT, loader: 'ts', sourcefile: 'sea-entry.ts' },
    outfile: script,
    bundle: true,
    format: 'cjs',
    platform: 'node',
    target: 'node20',
    define: { __WXHOOKS_VERSION__: JSON.stringify(pkg.version), 'import.meta.url': '__wxhooksUrl' },
    // a CommonJS script has no import.meta: the files it would look beside (help.json) are looked for beside the executable
    banner: { js: "const __wxhooksUrl = require('node:url').pathToFileURL(__filename).href;" },
    logLevel: 'warning',
  });
  const blob = join(dir, 'wxhooks.blob');
  const config = join(dir, 'sea-config.json');
  writeFileSync(config, JSON.stringify({ main: script, output: blob, disableExperimentalSEAWarning: true }));
  execFileSync(process.execPath, ['--experimental-sea-config', config], { stdio: ['ignore', 'ignore', 'inherit'] });
  const executable = join(dir, 'wxhooks');
  rmSync(executable, { force: true });
  copyFileSync(process.execPath, executable);
  await inject(executable, 'NODE_SEA_BLOB', readFileSync(blob), { sentinelFuse: 'NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2' });
  for (const made of [blob, config, script]) rmSync(made);
  return executable;
}

if (process.argv[1] === new URL(import.meta.url).pathname) {
  const executable = await buildSea();
  process.stdout.write(`${executable}: wxhooks as one executable for ${process.platform}-${process.arch} (Node ${process.versions.node} inside); run it where Node is not installed.\n`);
}
