import { spawn } from 'node:child_process';
import { resolve } from 'node:path';
import { expect, it } from 'vitest';
import { cleanEnv } from './helpers/cli.js';

it('the quick start (`npm run demo`) runs the whole story offline and exits 0', async () => {
  const child = spawn(process.execPath, [resolve(import.meta.dirname, '../scripts/demo.js')], { env: cleanEnv({ NO_COLOR: '1' }) });
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
