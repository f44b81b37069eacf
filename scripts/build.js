// The build (`npm run build`): dist/, written file by file, checking no types (about 4 s):
// - the library's modules, one for one (dist/**/*.js, what the package's `wxhooks` entry loads), by esbuild;
// - their declarations (dist/**/*.d.ts), by TypeScript's declaration transpiler;
// - the bundles: scripts/bundle.js (the CLI, the inspector page, wxhooks/web), scripts/bundle-relay.js (the
//   relay's Worker).
// Each source file is compiled alone, which the sources allow: tsconfig.json's isolatedModules (a type is
// imported and exported as a type) and isolatedDeclarations (what a file exports says its own types). The
// types are checked apart, once: by the tests' type check in `npm test` and `npm run test:all` (test/tsconfig.json
// includes src/), by `npm run typecheck`, and before `npm pack` (prepack).
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

const ROOT = resolve(import.meta.dirname, '..');

/** The library's sources: src/**\/*.ts but the page (bundled for the browser by scripts/bundle.js). */
function sources() {
  return readdirSync(join(ROOT, 'src'), { recursive: true })
    .filter((f) => f.endsWith('.ts') && !f.endsWith('.d.ts') && !f.startsWith('page/'))
    .map((f) => join(ROOT, 'src', f));
}

/** The modules, one for one: src/x.ts to dist/x.js. */
async function modules(files) {
  const { build } = await import('esbuild');
  await build({
    entryPoints: files,
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

/** The declarations, one for one: src/x.ts to dist/x.d.ts. Throws naming each file that cannot be. */
async function declarations(files) {
  const { default: ts } = await import('@typescript/typescript6');
  const config = ts.readConfigFile(join(ROOT, 'tsconfig.json'), ts.sys.readFile);
  const { options } = ts.parseJsonConfigFileContent(config.config, ts.sys, ROOT);
  const problems = [];
  for (const file of files) {
    const out = ts.transpileDeclaration(readFileSync(file, 'utf8'), { fileName: file, compilerOptions: options, reportDiagnostics: true });
    for (const d of out.diagnostics ?? []) {
      const at = d.file && d.start !== undefined ? `:${d.file.getLineAndCharacterOfPosition(d.start).line + 1}` : '';
      problems.push(`${file.slice(ROOT.length + 1)}${at}: ${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`);
    }
    const target = join(ROOT, 'dist', file.slice(join(ROOT, 'src').length + 1).replace(/\.ts$/, '.d.ts'));
    mkdirSync(dirname(target), { recursive: true });
    writeFileSync(target, out.outputText);
  }
  if (problems.length) throw new Error(`the declarations cannot be written file by file: write these exports' types out (isolatedDeclarations, tsconfig.json)\n${problems.join('\n')}`);
}

/** Empties dist/ and writes it again. */
async function build() {
  rmSync(join(ROOT, 'dist'), { recursive: true, force: true });
  const files = sources();
  await Promise.all([modules(files), declarations(files)]);
  await import('./bundle.js');
  await import('./bundle-relay.js');
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) {
  try {
    await build();
  } catch (err) {
    process.stderr.write(`${err instanceof Error ? err.message : err}\n`);
    process.exit(1);
  }
}
