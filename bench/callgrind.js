// `node bench/callgrind.js [floor] [json] [text] [inspect] [--window A-B]`: instructions per delivery, counted by valgrind's
// callgrind in the server process (the load from bench/load.js runs outside valgrind). Instruction counts
// do not move with the machine's load, unlike times: use this to tell whether a change to `listen` made
// it cheaper. Per delivery = (count after 16,000 deliveries - count after 8,000) / 8,000, so start-up and
// V8's compiling (which goes on for 15,000-20,000 deliveries in `listen`) mostly drop out. Needs valgrind;
// takes about two minutes per server. Not part of `npm run bench`. `inspect` is `listen --inspect` with
// bench/sse-reader.js reading the page's event stream (the reader runs outside valgrind); it has more
// code to compile, still ~11,700 instructions per delivery between the 8,000th and 16,000th: count it
// with --window 16000-24000.
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { generateSecret } from '../dist/signing/sign.js';
import { freePort } from '../scripts/harness.js';

const ROOT = new URL('..', import.meta.url).pathname;
const secret = generateSecret();
const args = process.argv.slice(2);
const windowAt = args.indexOf('--window');
const [FROM, TO] = windowAt < 0 ? [8000, 16000] : args.splice(windowAt, 2)[1].split('-').map(Number);
const servers = args.length ? args : ['floor', 'json', 'text'];

if (spawnSync('valgrind', ['--version']).status !== 0) {
  process.stderr.write('valgrind is not installed (Debian: apt-get install valgrind)\n');
  process.exit(2);
}

const accepting = (port) =>
  new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.on('connect', () => (socket.destroy(), resolve(true)));
    socket.on('error', () => resolve(false));
  });

/** Instructions the server executed in all, having answered `count` deliveries. */
async function instructions(server, count) {
  const dir = mkdtempSync(join(tmpdir(), 'wxhooks-callgrind-'));
  try {
    const port = await freePort();
    const inspectPort = await freePort();
    const flags = { json: ['--json'], inspect: ['--inspect', `127.0.0.1:${inspectPort}`] }[server] ?? [];
    const args = server === 'floor' ? [join(ROOT, 'bench/bare-receiver.js'), secret] : [join(ROOT, 'bin/wxhooks.js'), 'listen', '--port', String(port), ...flags, '--secret-env', 'BENCH_SECRET'];
    const child = spawn('valgrind', ['--tool=callgrind', `--callgrind-out-file=${dir}/out`, process.execPath, ...args], {
      env: { ...process.env, WXHOOKS_CONFIG_DIR: dir, BENCH_SECRET: secret },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let printed = '';
    let said = '';
    child.stdout.on('data', (d) => (printed += d));
    child.stderr.on('data', (d) => (said += d));
    let target = port;
    for (let i = 0; ; i++) {
      if (i > 1200) throw new Error(`${server} did not start under valgrind`);
      await new Promise((r) => setTimeout(r, 100));
      if (server === 'floor') {
        const m = /^(\d+)$/m.exec(printed);
        if (m) target = Number(m[1]);
        else continue;
      }
      if ((await accepting(target)) && (server !== 'inspect' || /Inspector: \S+/.test(said))) break;
    }
    // the page's link, with its token, as listen printed it
    const link = /Inspector: (\S+)/.exec(said)?.[1];
    const reader = server === 'inspect' ? spawn(process.execPath, [join(ROOT, 'bench/sse-reader.js'), link], { stdio: ['ignore', 'pipe', 'ignore'] }) : undefined;
    if (reader) await new Promise((resolve) => reader.stdout.once('data', resolve));
    const load = spawnSync(process.execPath, [join(ROOT, 'bench/load.js'), String(target), secret, String(count), '50', '0'], { encoding: 'utf8' });
    if (load.status !== 0) throw new Error(load.stderr);
    await new Promise((resolve) => (child.once('exit', resolve), child.kill('SIGTERM')));
    reader?.kill();
    return Number(/^(?:summary|totals): (\d+)/m.exec(readFileSync(`${dir}/out`, 'utf8'))[1]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

for (const server of servers) {
  const few = await instructions(server, FROM);
  const many = await instructions(server, TO);
  const name = { floor: 'floor (bench/bare-receiver.js)', json: 'listen --json', text: 'listen', inspect: 'listen --inspect (stream read)' }[server] ?? server;
  process.stdout.write(`${name.padEnd(32)} ${Math.round((many - few) / (TO - FROM)).toLocaleString('en')} instructions per delivery (${FROM}-${TO})\n`);
}
