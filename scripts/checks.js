// What `npm test` and `npm run test:all` do around the tests: the build, the formatter and linter, and the
// type checks, side by side (none waits on another: the type checks read the sources, not dist/), each
// one's output printed whole when it ends. `node scripts/checks.js -- <command…>` also runs the command
// (the tests) as soon as the build's code is in dist/ (esbuild, about 1 s), beside the checks still running:
// the declarations (tsc) among them. A test that reads the declarations waits for that step
// (test/helpers/build.ts: the file named by WXHOOKS_TYPES_BUILT says when it ended, and how). Exits 1 if
// any check failed, else with the command's code, after all have ended.
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { clean } from './build.js';

const ROOT = resolve(import.meta.dirname, '..');
const bin = (name) => resolve(ROOT, 'node_modules', '.bin', name);

const STEPS = [
  // the build (scripts/build.js), as `npm run build` does it, in its two parts: the tests need the first
  { name: 'build: the code (esbuild)', command: 'node', args: ['scripts/build.js', '--code'] },
  { name: 'build: the declarations, with the type check of src/ (tsc)', command: 'node', args: ['scripts/build.js', '--types'] },
  { name: 'type check of the tests', command: bin('tsc'), args: ['-p', 'test/tsconfig.json', '--noEmit'] },
  { name: 'format and lint (biome check), type check of the page', command: 'sh', args: ['-c', `"${bin('biome')}" check && "${bin('tsc')}" -p src/page/tsconfig.json`] },
];
const [CODE, TYPES] = STEPS;

const dash = process.argv.indexOf('--');
const then = dash === -1 ? [] : process.argv.slice(dash + 1);

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

/** The command, its output the terminal's own; resolves with its exit code. */
function runThen(env) {
  return new Promise((done) => {
    // the package's own binary (vitest) when it is one, as npm's scripts find it
    const command = existsSync(bin(then[0])) ? bin(then[0]) : then[0];
    const child = spawn(command, then.slice(1), { cwd: ROOT, stdio: 'inherit', env });
    child.on('error', (err) => (process.stderr.write(`${then[0]}: ${err.message}\n`), done(1)));
    child.on('close', (code, signal) => done(code ?? (signal ? 1 : 0)));
  });
}

const report = (r) => `${r.ok ? '✓' : '✗'} ${r.step.name} (${(r.ms / 1000).toFixed(1)} s)\n${r.out.trim() ? `${r.out.trimEnd()}\n` : ''}`;

// While the command runs, a check that ends is held back (its lines would cut into the command's own
// progress on the terminal) and printed when the command ends; a failure is said at once, in one line.
let running;
const held = [];
// where the declarations' step says it ended: "ok" or "failed"
const marks = mkdtempSync(join(tmpdir(), 'wxhooks-checks-'));
const typesBuilt = join(marks, 'types');
clean();
const results = STEPS.map((step) =>
  run(step).then((r) => {
    if (step === TYPES) writeFileSync(typesBuilt, r.ok ? 'ok' : 'failed');
    if (!running) process.stdout.write(report(r));
    else {
      held.push(r);
      if (!r.ok) process.stdout.write(`\n✗ ${r.step.name} failed (its output follows the tests)\n`);
    }
    return r;
  }),
);
let code = 0;
if (then.length) {
  const built = await results[STEPS.indexOf(CODE)];
  if (built.ok) {
    running = runThen({ ...process.env, WXHOOKS_TYPES_BUILT: typesBuilt });
    code = await running;
  }
}
const all = await Promise.all(results);
rmSync(marks, { recursive: true, force: true });
for (const r of held) process.stdout.write(report(r));
if (all.some((r) => !r.ok)) process.exit(1);
process.exit(code);
