import { spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { expect, it } from 'vitest';
import { cleanEnv, tempDir } from '../helpers/cli.js';
import { doc, shBlockAfter } from '../helpers/guide.js';

const DEMO = resolve(import.meta.dirname, '../../scripts/demo.js');

it("the README's quick start: `npm run demo` is this script (after the build), `npm test` the fast tier", () => {
  const block = shBlockAfter(doc('README.md'), '## Quick start')
    .body.split('\n')
    .map((l) => l.split('#')[0]!.trim());
  expect(block).toEqual(['npm ci && npm run demo', 'npm ci && npm test']);
  const { scripts } = JSON.parse(doc('package.json')) as { scripts: Record<string, string> };
  expect(scripts.demo).toBe('npm run build && node scripts/demo.js'); // what the test below runs, on a terminal
  expect(scripts.test).toContain('vitest');
});

/** Runs the demo on a terminal (a pseudo-terminal of `columns`), as `npm run demo` at a shell: what it showed, and its exit code. */
function demoOnTerminal(columns: number): Promise<{ code: number | null; shown: string }> {
  const script = resolve(import.meta.dirname, '../helpers/terminal.py');
  const child = spawn('python3', [script, 'never typed', '', process.execPath, DEMO], { env: cleanEnv({ NO_COLOR: '1', TERMINAL_COLUMNS: String(columns), TERMINAL_SECONDS: '90' }) });
  let shown = '';
  child.stdout.setEncoding('utf8').on('data', (d: string) => (shown += d));
  child.stderr.resume();
  return new Promise((r) => child.on('close', (code) => r({ code, shown: shown.replace(/\r\n/g, '\n') })));
}

it('the quick start (`npm run demo`) runs the whole story offline, on a terminal, and exits 0', async () => {
  const { code, shown: out } = await demoOnTerminal(200);
  expect(out).toContain('Done: every delivery verified');
  expect(out).toMatch(/✗ 502 .*app 500 "database not ready"/);
  expect(out.match(/✓ 200/g)).toHaveLength(4 + 6); // the first run's 4, then the run with a hole: 5 hours (one twice) less one, and its init event
  expect(out).toContain('is not complete after 4s (4/5 hours): missing +18h.');
  // each step's listen lines come before the next step's title (#34): the model run's four answers before "6."
  const step6 = out.indexOf('6. Waiting for the retry');
  expect(out.slice(0, step6).match(/listen │ \d\d:\d\d:\d\d [✓✗]/g)?.length).toBeGreaterThanOrEqual(4); // and the retry, when it came first
  // a delivery sent again is skipped as a duplicate
  expect(out).toMatch(/listen │ .*↺ 200 {2}duplicate, skipped/);
  // what the emulator sent, from `wxhooks emulator deliveries`: the refused attempt, then its retry
  expect(out).toMatch(/1 +1 +forecast_hour\.available +trg_\S+ +1 +failed 502 \(\d+ ms\) +retry 2 at \d\d:\d\d:\d\d +\{"error":"forwarding failed/);
  expect(out).toMatch(/1 +1 +forecast_hour\.available +trg_\S+ +2 +delivered 200 \(\d+ ms\) +- +\{"ok":true\}/);
  // the closing table is aligned on a terminal, not tab-separated
  expect(out).toMatch(/wm-6 {2,}2026-11-22T00:00:00Z {2,}\+0h-\+12h\/6, \+24h {2,}\+18h {2,}yes/);
  expect(out).not.toContain('\t');
  // the intended exit 9 (a run with a hole) says what is missing, and does not send the user to doctor: deliveries came
  expect(out).not.toContain('doctor');
  expect(code).toBe(0);
}, 100_000);

/** The processes still running whose environment names `dir` (the demo's children get it through TMPDIR). */
function processesUsing(dir: string): number[] {
  const pids: number[] = [];
  for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    try {
      if (readFileSync(`/proc/${pid}/environ`, 'latin1').includes(dir)) pids.push(Number(pid));
    } catch {
      // gone, or not ours to read
    }
  }
  return pids;
}

for (const [how, stop] of [
  ['its output closed after 3 lines (npm run demo | head -3)', (child: ReturnType<typeof spawn>) => child.stdout!.destroy()],
  ['Ctrl-C once listen runs', (child: ReturnType<typeof spawn>) => child.kill('SIGINT')],
  ['SIGTERM once listen runs', (child: ReturnType<typeof spawn>) => child.kill('SIGTERM')],
] as const) {
  it(`the demo, ${how}: its children end and its folder (with a webhook secret) is removed`, async () => {
    const tmp = tempDir('wxhooks-demo-tmp-');
    const child = spawn(process.execPath, [DEMO], { env: cleanEnv({ NO_COLOR: '1', TMPDIR: tmp }) });
    let out = '';
    let lines = 0;
    let stopped = false;
    child.stderr!.resume();
    child.stdout!.setEncoding('utf8').on('data', (d: string) => {
      out += d;
      lines += d.split('\n').length - 1;
      const ready = how.startsWith('its output') ? lines >= 3 : out.includes('4. The receiver');
      if (ready && !stopped) {
        stopped = true;
        stop(child);
      }
    });
    const code = await new Promise<number | null>((r) => child.on('close', r));
    expect(stopped).toBe(true);
    expect(code).not.toBe(0);
    expect(readdirSync(tmp)).toEqual([]);
    expect(processesUsing(tmp)).toEqual([]);
  }, 40_000);
}
