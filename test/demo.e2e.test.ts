import { spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { expect, it } from 'vitest';
import { cleanEnv, tempDir } from './helpers/cli.js';

const DEMO = resolve(import.meta.dirname, '../scripts/demo.js');

it('the quick start (`npm run demo`) runs the whole story offline and exits 0', async () => {
  const child = spawn(process.execPath, [DEMO], { env: cleanEnv({ NO_COLOR: '1' }) });
  let out = '';
  child.stdout.setEncoding('utf8').on('data', (d: string) => (out += d));
  child.stderr.setEncoding('utf8').on('data', (d: string) => (out += d));
  const code = await new Promise<number | null>((r) => child.on('close', r));
  expect(out).toContain('Done: every delivery verified');
  expect(out).toMatch(/✗ 502 .*app 500 "database not ready"/);
  expect(out).toMatch(/sub 1 attempt 2: delivered \(200\)/);
  expect(out.match(/✓ 200/g)).toHaveLength(4 + 6); // the first run's 4, then the run with a hole: 5 hours (one twice) less one, and its init event
  expect(out).toContain('is not complete after 4s (4/5 hours): missing +18h.');
  expect(out).toMatch(/wm-6\t2026-11-22T00:00:00Z\t\+0h-\+12h\/6, \+24h\t\+18h\tyes/);
  expect(code).toBe(0);
}, 40_000);

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
