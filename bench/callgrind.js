// `node bench/callgrind.js [floor] [json] [text]`: instructions per delivery, counted by valgrind's
// callgrind in the server process (the load from bench/load.js runs outside valgrind). Instruction counts
// do not move with the machine's load, unlike times: use this to tell whether a change to `listen` made
// it cheaper. Per delivery = (count after 16,000 deliveries - count after 8,000) / 8,000, so start-up and
// V8's compiling (which goes on for 15,000-20,000 deliveries in `listen`) mostly drop out. Needs valgrind;
// takes about two minutes per server. Not part of `npm run bench`.
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { generateSecret } from '../dist/index.js';
import { freePort } from '../scripts/harness.js';

const ROOT = new URL('..', import.meta.url).pathname;
const secret = generateSecret();
const servers = process.argv.slice(2).length ? process.argv.slice(2) : ['floor', 'json', 'text'];

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
    const args =
      server === 'floor'
        ? [join(ROOT, 'bench/bare-receiver.js'), secret]
        : [join(ROOT, 'bin/wxhooks.js'), 'listen', '--port', String(port), ...(server === 'json' ? ['--json'] : []), '--secret-env', 'BENCH_SECRET'];
    const child = spawn('valgrind', ['--tool=callgrind', `--callgrind-out-file=${dir}/out`, process.execPath, ...args], {
      env: { ...process.env, WXHOOKS_CONFIG_DIR: dir, BENCH_SECRET: secret },
      stdio: ['ignore', 'pipe', 'ignore'],
    });
    let printed = '';
    child.stdout.on('data', (d) => (printed += d));
    let target = port;
    for (let i = 0; ; i++) {
      if (i > 1200) throw new Error(`${server} did not start under valgrind`);
      await new Promise((r) => setTimeout(r, 100));
      if (server === 'floor') {
        const m = /^(\d+)$/m.exec(printed);
        if (m) target = Number(m[1]);
        else continue;
      }
      if (await accepting(target)) break;
    }
    const load = spawnSync(process.execPath, [join(ROOT, 'bench/load.js'), String(target), secret, String(count), '50', '0'], { encoding: 'utf8' });
    if (load.status !== 0) throw new Error(load.stderr);
    await new Promise((resolve) => (child.once('exit', resolve), child.kill('SIGTERM')));
    return Number(/^(?:summary|totals): (\d+)/m.exec(readFileSync(`${dir}/out`, 'utf8'))[1]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

for (const server of servers) {
  const few = await instructions(server, 8000);
  const many = await instructions(server, 16000);
  const name = { floor: 'floor (bench/bare-receiver.js)', json: 'listen --json', text: 'listen' }[server] ?? server;
  process.stdout.write(`${name.padEnd(32)} ${Math.round((many - few) / 8000).toLocaleString('en')} instructions per delivery\n`);
}
