// What `npm test` and `npm run test:all` run: the build, the formatter and linter, the type checks, and
// the tests.
//   node scripts/checks.js [COMMAND...]
// The build comes first (the tests run what it writes); the tests (COMMAND: `vitest run …`) start as soon
// as it is done, while the tests' type check and Biome (neither reads what another writes) run beside the
// build and then beside the tests. Each check's output is printed whole when it ends (after the tests,
// when they are running). Exits 1 if any check failed, else with the tests' code.
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';

const ROOT = resolve(import.meta.dirname, '..');
const bin = (name) => resolve(ROOT, 'node_modules', '.bin', name);

// the build as `npm run build` runs it: tsc (which type checks src/), then the bundles
const BUILD = { name: 'build', command: 'npm', args: ['run', '--silent', 'build'] };
const CHECKS = [
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

const say = (r) => process.stdout.write(`${r.ok ? '✓' : '✗'} ${r.step.name} (${(r.ms / 1000).toFixed(1)} s)\n${r.out.trim() ? `${r.out.trimEnd()}\n` : ''}`);

const command = process.argv.slice(2);
let testing = false;
const held = [];
const checks = CHECKS.map((step) =>
  run(step).then((r) => {
    if (testing) held.push(r);
    else say(r);
    return r;
  }),
);
const built = await run(BUILD);
say(built);
let code = built.ok ? 0 : 1;
if (built.ok && command.length) {
  testing = true;
  code = await new Promise((done) => {
    // `vitest` is the project's own, with or without npm's PATH
    const program = existsSync(bin(command[0])) ? bin(command[0]) : command[0];
    const tests = spawn(program, command.slice(1), { cwd: ROOT, stdio: 'inherit' });
    tests.on('error', (err) => (process.stderr.write(`${command[0]}: ${err.message}\n`), done(1)));
    tests.on('close', (c, signal) => done(c ?? (signal ? 1 : 0)));
  });
  testing = false;
  for (const r of held) say(r);
}
const results = await Promise.all(checks);
if (results.some((r) => !r.ok)) process.exit(1);
process.exit(code);
