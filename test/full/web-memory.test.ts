import { spawn } from 'node:child_process';
import { connect } from 'node:net';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { writeFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eachLine, freePort } from '../../scripts/harness.js';
import { tempDir } from '../helpers/cli.js';

// wxhooks/web in Deno holds at most maxInflight and a fixed amount while senders hold unsigned bodies
// (#41.12: it read 544 MiB for 40 × 19 MiB against the default 256 MiB, a byte of body costing one of the
// budget while Web Crypto's verification holds it three times). Here: 20 senders of 8 MiB against
// maxInflight 32 MiB, each sending all but its last byte, then the byte 3 s later. The server samples its
// own RSS every 20 ms. Measured: 33-65 MiB over the idle process (110-119 MiB before the fix).

const ROOT = resolve(import.meta.dirname, '..', '..');
const MiB = 1024 * 1024;
const MAX_INFLIGHT = 32 * MiB;
const FIXED = 48 * MiB;

const SERVER = (web: string) => `import { Webhooks, createWebHandler } from '${web}';
const [port, statsPort, max] = Deno.args.map(Number);
const handle = createWebHandler(new Webhooks({ secret: 'whsec_' + btoa('k'.repeat(32)) }), { maxInflight: max, maxBody: 32 * 1024 * 1024 });
let peak = 0;
setInterval(() => (peak = Math.max(peak, Deno.memoryUsage().rss)), 20);
Deno.serve({ port: statsPort, hostname: '127.0.0.1', onListen() {} }, () => Response.json({ rss: Deno.memoryUsage().rss, peak }));
Deno.serve({ port, hostname: '127.0.0.1', onListen: () => console.log('listening') }, handle);
`;

let child: ReturnType<typeof spawn>;
let port: number;
let statsPort: number;

beforeAll(async () => {
  const dir = tempDir('wxhooks-deno-memory-');
  writeFileSync(join(dir, 'server.js'), SERVER(pathToFileURL(join(ROOT, 'dist', 'web.js')).href));
  [port, statsPort] = [await freePort(), await freePort()];
  child = spawn(
    join(ROOT, 'node_modules', '.bin', 'deno'),
    ['run', '--allow-net=127.0.0.1', '--allow-read', '--node-modules-dir=manual', join(dir, 'server.js'), String(port), String(statsPort), String(MAX_INFLIGHT)],
    {
      cwd: ROOT, // wxhooks/web's dependencies (@opentelemetry/api) from the project's node_modules, as an app's own
    },
  );
  await new Promise<void>((ready, failed) => {
    eachLine(child.stdout!, (line: string) => line === 'listening' && ready());
    child.once('exit', (code) => failed(new Error(`deno exited ${code}`)));
  });
}, 60_000);
afterAll(() => void child?.kill('SIGKILL'));

const stats = async () => (await (await fetch(`http://127.0.0.1:${statsPort}/`)).json()) as { rss: number; peak: number };

/** One sender: its headers and all but the last byte of an unsigned body, then the last byte 3 s later; resolves with the status it got. */
function holdUnsigned(i: number, size: number, ts: number): Promise<string> {
  return new Promise((done) => {
    const s = connect(port, '127.0.0.1', () => {
      const head = `POST / HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: ${size}\r\ntrigger-id: trg_${i}\r\nwebhook-timestamp: ${ts}\r\nwebhook-signature: v1,${Buffer.alloc(32, i).toString('base64')}\r\n\r\n`;
      s.write(head);
      s.write(Buffer.alloc(size - 1, '{'));
      setTimeout(() => s.write('}'), 3000).unref();
    });
    let answer = '';
    s.setEncoding('latin1').on('data', (d: string) => {
      answer += d;
      if (answer.includes('\r\n\r\n')) s.destroy();
    });
    s.on('error', () => undefined);
    s.on('close', () => done(answer.slice(9, 12) || 'closed'));
  });
}

describe('wxhooks/web in Deno, senders holding unsigned bodies', () => {
  it('holds at most maxInflight and a fixed amount; the rest are told 503', async () => {
    await new Promise((r) => setTimeout(r, 500)); // the idle process settles
    const idle = await stats();
    const ts = Math.floor(Date.now() / 1000);
    const answers = await Promise.all(Array.from({ length: 20 }, (_, i) => holdUnsigned(i, 8 * MiB, ts)));
    const after = await stats();
    const over = after.peak - idle.rss;
    console.log(`20 unsigned 8 MiB bodies against maxInflight 32 MiB: ${answers.filter((a) => a === '503').length} told 503; peak ${Math.round(over / MiB)} MiB over the idle process`);
    expect(answers.every((a) => a === '401' || a === '503')).toBe(true);
    expect(answers.filter((a) => a === '503').length).toBeGreaterThan(10);
    expect(over).toBeLessThan(MAX_INFLIGHT + FIXED);
  }, 60_000);
});
