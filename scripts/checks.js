// What `npm test` and `npm run test:all` do before the tests: the build, the formatter and linter, and the
// type checks, side by side (none waits on another: the type checks read the sources, not dist/), each
// one's output printed whole when it ends. Exits 1 if any failed, after all have ended.
import { spawn } from 'node:child_process';
import { resolve } from 'node:path';

const ROOT = resolve(import.meta.dirname, '..');
const bin = (name) => resolve(ROOT, 'node_modules', '.bin', name);

const STEPS = [
  // the build: tsc, then the bundles (scripts/bundle.js, bundle-relay.js), as `npm run build` does
  { name: 'build', command: 'npm', args: ['run', '--silent', 'build'] },
  { name: 'type check of the tests', command: bin('tsc'), args: ['-p', 'test/tsconfig.json', '--noEmit'] },
  { name: 'format and lint (biome check), type check of the page', command: 'sh', args: ['-c', `"${bin('biome')}" check && "${bin('tsc')}" -p src/page/tsconfig.json`] },
];

function run(step) {
  const started = Date.now();
  return new Promise((done) => {
    const child = spawn(step.command, step.args, { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (out += d));
    child.on('error', (err) => done({ step, ok: false, out: `${out}${err.message}\n`, ms: Date.now() - started }));
    child.on('close', (code) => done({ step, ok: code === 0, out, ms: Date.now() - started }));
  });
}

const results = await Promise.all(
  STEPS.map((step) =>
    run(step).then((r) => {
      const seconds = (r.ms / 1000).toFixed(1);
      process.stdout.write(`${r.ok ? '✓' : '✗'} ${r.step.name} (${seconds} s)\n${r.out.trim() ? `${r.out.trimEnd()}\n` : ''}`);
      return r;
    }),
  ),
);
if (results.some((r) => !r.ok)) process.exit(1);
