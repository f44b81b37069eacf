// Bundles the CLI and its dependencies into dist/bin/, split at each lazy import, so a command loads
// a few pre-linked files instead of hundreds of modules (conf alone is ~70 ms unbundled, ~13 ms
// bundled). undici stays outside the bundle: only the emulator, `listen --forward-to`, `send` and
// proxied requests load it; the service client's other requests go through node:http. So do
// OpenTelemetry (listen loads its SDK only with the OTEL_* variables set, and the API with it) and
// prom-client (only with --metrics): each is one copy, the app's and the SDK's API the same.
import { build } from 'esbuild';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { WEB_BUNDLE } from './web-bundle.js';

const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8'));

// esbuild does not empty its output folder: chunks of earlier builds would pile up
rmSync(new URL('../dist/bin', import.meta.url), { recursive: true, force: true });

await build({
  entryPoints: [new URL('../src/cli.ts', import.meta.url).pathname, new URL('../src/help.ts', import.meta.url).pathname],
  outdir: new URL('../dist/bin', import.meta.url).pathname,
  bundle: true,
  splitting: true,
  format: 'esm',
  platform: 'node',
  target: 'node20',
  external: ['undici', '@opentelemetry/*', 'prom-client'],
  define: { __WXHOOKS_VERSION__: JSON.stringify(pkg.version) },
  // commander is CommonJS: give the bundle a require of its own
  banner: { js: "import { createRequire as __wxCreateRequire } from 'node:module'; const require = __wxCreateRequire(import.meta.url);" },
  logLevel: 'warning',
});

// The inspector page: one script (uPlot bundled in) and one style sheet, served by `listen --inspect`.
rmSync(new URL('../dist/inspector', import.meta.url), { recursive: true, force: true });
await build({
  entryPoints: [new URL('../src/page/app.ts', import.meta.url).pathname],
  outfile: new URL('../dist/inspector/app.js', import.meta.url).pathname,
  bundle: true,
  minify: true,
  format: 'iife',
  platform: 'browser',
  target: 'es2020',
  logLevel: 'warning',
});
mkdirSync(new URL('../dist/inspector', import.meta.url), { recursive: true });
writeFileSync(
  new URL('../dist/inspector/app.css', import.meta.url),
  readFileSync(new URL('../node_modules/uplot/dist/uPlot.min.css', import.meta.url), 'utf8') + readFileSync(new URL('../src/page/app.css', import.meta.url), 'utf8'),
);

// wxhooks/web: the handler library for any runtime with Web Crypto, one file (its options, and why each:
// scripts/web-bundle.js). Its size is measured by `npm run bench`, and held to a ceiling by
// test/web-size.test.ts.
await build({ ...WEB_BUNDLE, outfile: new URL('../dist/web.js', import.meta.url).pathname, logLevel: 'warning' });

// Every command's help, rendered once here, so `--help` needs no commander at run time.
const { renderAllHelp } = await import(new URL('../dist/bin/help.js', import.meta.url).href);
writeFileSync(new URL('../dist/bin/help.json', import.meta.url), JSON.stringify(await renderAllHelp()));
