// The relay's Worker: one file (dist/relay-worker/index.js), bundled from src/relay/worker.ts on esbuild's
// neutral platform (a node: import fails the build), as wxhooks/web is. relay/wrangler.toml deploys it
// from a checkout; `wxhooks relay worker DIR` copies it, with a wrangler.toml of its own, for a user of
// the npm package.
import { build } from 'esbuild';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';

const out = new URL('../dist/relay-worker/', import.meta.url);
rmSync(out, { recursive: true, force: true });
await build({
  entryPoints: [new URL('../src/relay/worker.ts', import.meta.url).pathname],
  outfile: new URL('index.js', out).pathname,
  bundle: true,
  format: 'esm',
  platform: 'neutral',
  target: 'es2022',
  logLevel: 'warning',
});
// the same configuration, with `main` pointing at the bundle beside it
mkdirSync(out, { recursive: true });
const toml = readFileSync(new URL('../relay/wrangler.toml', import.meta.url), 'utf8');
writeFileSync(new URL('wrangler.toml', out), toml.replace(/^main = .*$/m, 'main = "index.js"'));
