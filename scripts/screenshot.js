// The screenshots of the README and docs/inspector.md (docs/inspector.png, docs/inspector-runs.png), from a real session: an
// emulator, `listen --inspect` in front of a small app that refuses one delivery once, and a short
// `trigger run`; then the page in headless Chromium (playwright-core, as the tests launch it). Needs the
// built CLI (`npm run build`) and Chromium (CHROMIUM_PATH, else Debian's /usr/bin/chromium).
// Run: node scripts/screenshot.js
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { eachLine, freePort, launchBrowser } from './harness.js';

const BIN = new URL('../bin/wxhooks.js', import.meta.url).pathname;
const DOCS = new URL('../docs/', import.meta.url).pathname;
const dir = mkdtempSync(join(tmpdir(), 'wxhooks-shot-'));
const env = { ...process.env, WXHOOKS_CONFIG_DIR: dir, NO_COLOR: '1' };
for (const k of ['WX_BASE_URL', 'WX_API_KEY', 'WX_CLIENT_ID', 'HTTP_PROXY', 'HTTPS_PROXY', 'http_proxy', 'https_proxy']) delete env[k];
const children = [];

/** A long-running command: each stdout line parsed (JSON), and a wait for the first that matches. */
function start(args) {
  const child = spawn(process.execPath, [BIN, ...args], { env, stdio: ['ignore', 'pipe', 'inherit'] });
  children.push(child);
  const seen = [];
  const waiting = new Set();
  eachLine(child.stdout, (line) => {
    try {
      seen.push(JSON.parse(line));
    } catch {
      return;
    }
    for (const w of waiting) w();
  });
  child.until = (match, count = 1) =>
    new Promise((resolve, reject) => {
      const look = () => {
        const found = seen.filter(match);
        if (found.length >= count) waiting.delete(look), resolve(found[count - 1]);
        else if (child.exitCode !== null) reject(new Error(`wxhooks ${args[0]} exited ${child.exitCode}`));
      };
      waiting.add(look);
      child.on('close', look);
      look();
    });
  return child;
}

function run(args, extra = {}) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], { env: { ...env, ...extra }, stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.setEncoding('utf8').on('data', (d) => (out += d));
    child.on('close', (code) => (code === 0 ? resolve(out) : reject(new Error(`wxhooks ${args.join(' ')} exited ${code}`))));
  });
}

async function main() {
  // the app: it refuses +6h once ("database not ready"), so that delivery shows two attempts
  let refused = false;
  const app = createServer((req, res) => {
    let body = '';
    req.on('data', (d) => (body += d));
    req.on('end', () => {
      const payload = JSON.parse(body);
      if (payload.data?.forecast_hour === 6 && !refused) {
        refused = true;
        res.writeHead(500, { 'content-type': 'application/json' }).end('{"error":"database not ready"}');
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ stored: payload.trigger_id }));
    });
  });
  const appPort = await freePort();
  await new Promise((resolve) => app.listen(appPort, '127.0.0.1', resolve));

  const emulator = start(['emulator', '--port', String(await freePort()), '--in-memory', '--retry-delays', '1s,1s,1s', '--json']);
  const { base_url, api_key } = await emulator.until((l) => typeof l.base_url === 'string');
  Object.assign(env, { WX_BASE_URL: base_url, WX_API_KEY: api_key });
  const listenPort = await freePort();
  await run(['webhook', 'create', '--url', `http://127.0.0.1:${listenPort}/`, '--subscribe', 'forecast_hour.available:response=gridded', '--subscribe', 'initialization_time.available', '--json']);
  const listen = start([
    'listen',
    '--webhook',
    '1',
    '--port',
    String(listenPort),
    '--forward-to',
    `http://127.0.0.1:${appPort}/webhooks`,
    '--inspect',
    `127.0.0.1:${await freePort()}`,
    '--expect-hours',
    '0-24/6',
    '--json',
  ]);
  const { url } = await listen.until((l) => l.event === 'inspector');
  // a whole run: five hours and its event accepted, +6h once the emulator's retry came
  await run(['trigger', 'run', '--hours', '0-24/6']);
  await listen.until((l) => l.outcome === 'forward_failed');
  await listen.until((l) => l.outcome === 'accepted', 6);
  // and the run before it, with two hours missing, for the runs view
  const previous = new Date(Math.floor(Date.now() / 21_600_000) * 21_600_000 - 21_600_000).toISOString().replace('.000', '');
  await run(['trigger', 'run', '--hours', '0-24/6', '--skip-hours', '12,18', '--init-time', previous]);
  await listen.until((l) => l.outcome === 'accepted', 10);

  const browser = await launchBrowser();
  try {
    const page = await browser.newPage({ viewport: { width: 1200, height: 1180 } });
    await page.goto(url);
    await page.locator('.row').nth(9).waitFor();
    await page.locator('.row', { hasText: '×2 attempts' }).click();
    await page.locator('#detail canvas').first().waitFor();
    await page.screenshot({ path: join(DOCS, 'inspector.png') });
    await page.getByRole('button', { name: 'Runs' }).click();
    await page.getByText('complete').first().waitFor();
    await page.screenshot({ path: join(DOCS, 'inspector-runs.png'), clip: { x: 0, y: 0, width: 1200, height: 240 } });
  } finally {
    await browser.close();
  }
  app.close();
}

try {
  await main();
  process.stdout.write(`docs/inspector.png, docs/inspector-runs.png\n`);
} finally {
  for (const c of children) c.kill('SIGINT');
  await Promise.all(children.map((c) => (c.exitCode === null ? new Promise((r) => c.on('close', r)) : undefined)));
  rmSync(dir, { recursive: true, force: true });
}
