// What `npm test` and `npm run test:all` do around the tests: the build, the formatter and linter, and the
// type checks, side by side (none waits on another: the type checks read the sources, not dist/), each
// one's output printed whole when it ends. `node scripts/checks.js -- <command…>` also runs the command
// (the tests) as soon as the build is done (about 4 s: it checks no types, scripts/build.js), beside the
// checks still running: the tests need dist/, not the checks. Exits 1 if any check failed, else with the
// command's code, after all have ended.
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';

const ROOT = resolve(import.meta.dirname, '..');
const bin = (name) => resolve(ROOT, 'node_modules', '.bin', name);
// TypeScript 7's compiler, by its path: node_modules/.bin/tsc may be TypeScript 6's (@typescript/typescript6,
// whose JS API scripts/build.js and test/helpers/exports.ts use, brings one too)
const TSC = resolve(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');

const STEPS = [
  // the build, as `npm run build` does it
  { name: 'build', command: 'node', args: ['scripts/build.js'] },
  // src/ with the tests (test/tsconfig.json includes it): the one type check of the library's sources here
  { name: 'type check of src/ and the tests', command: 'node', args: [TSC, '-p', 'test/tsconfig.json', '--noEmit'] },
  { name: 'format and lint (biome check), type check of the page', command: 'sh', args: ['-c', `"${bin('biome')}" check && node "${TSC}" -p src/page/tsconfig.json`] },
];

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
function runThen() {
  return new Promise((done) => {
    // the package's own binary (vitest) when it is one, as npm's scripts find it
    const command = existsSync(bin(then[0])) ? bin(then[0]) : then[0];
    const child = spawn(command, then.slice(1), { cwd: ROOT, stdio: 'inherit' });
    child.on('error', (err) => (process.stderr.write(`${then[0]}: ${err.message}\n`), done(1)));
    child.on('close', (code, signal) => done(code ?? (signal ? 1 : 0)));
  });
}

const report = (r) => `${r.ok ? '✓' : '✗'} ${r.step.name} (${(r.ms / 1000).toFixed(1)} s)\n${r.out.trim() ? `${r.out.trimEnd()}\n` : ''}`;

// While the command runs, a check that ends is held back (its lines would cut into the command's own
// progress on the terminal) and printed when the command ends; a failure is said at once, in one line.
let running;
const held = [];
const check = (step) =>
  run(step).then((r) => {
    if (!running) process.stdout.write(report(r));
    else {
      held.push(r);
      if (!r.ok) process.stdout.write(`\n✗ ${r.step.name} failed (its output follows the tests)\n`);
    }
    return r;
  });
const [BUILD, ...CHECKS] = STEPS;
let code = 0;
let results;
if (then.length) {
  // the build alone first: it is what the tests wait for (4 s alone, 9-10 s beside the checks); the checks
  // then run beside the tests
  const built = await check(BUILD);
  results = [built, ...CHECKS.map(check)];
  if (built.ok) {
    running = runThen();
    code = await running;
  }
} else results = STEPS.map(check);
const all = await Promise.all(results);
for (const r of held) process.stdout.write(report(r));
if (all.some((r) => !r.ok)) process.exit(1);
process.exit(code);
