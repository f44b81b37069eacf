import { execFile, spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { promisify } from 'node:util';
import { beforeAll, expect, it } from 'vitest';
import { eachLine } from '../../scripts/harness.js';
import { buildSea } from '../../scripts/sea.js';
import { tempDir } from '../helpers/cli.js';

// wxhooks as one executable (#34, section 5: Node's single executable applications), built by the script
// `npm run sea` runs, and run with no Node on the PATH: a user without Node runs it.

const run = promisify(execFile);
const { version } = JSON.parse(readFileSync(resolve(import.meta.dirname, '../../package.json'), 'utf8')) as { version: string };
let executable: string;
/** Nothing but the store folder: no PATH, so no node to find. */
let env: Record<string, string>;

beforeAll(async () => {
  const dir = tempDir('wxhooks-sea-');
  executable = await buildSea(dir);
  expect(readdirSync(dir)).toEqual(['wxhooks']); // one file: the bundle it was made from is gone
  env = { WXHOOKS_CONFIG_DIR: tempDir(), NO_COLOR: '1' };
}, 180_000);

it('runs --version, with no Node on the PATH', async () => {
  const r = await run(executable, ['--version'], { env });
  expect(r.stdout.trim()).toBe(version);
  expect(r.stderr).toBe(''); // no warning of SEA's being experimental
});

it('runs a command: an emulator, and auth status against it', async () => {
  const emulator = spawn(executable, ['emulator', '--port', '0', '--in-memory', '--json'], { env });
  try {
    const info = await new Promise<{ base_url: string; api_key: string }>((resolveInfo, reject) => {
      eachLine(emulator.stdout, (line) => resolveInfo(JSON.parse(line) as { base_url: string; api_key: string }));
      emulator.on('close', (code) => reject(new Error(`the emulator exited ${code}`)));
    });
    const r = await run(executable, ['auth', 'status', '--json'], { env: { ...env, WX_BASE_URL: info.base_url, WX_API_KEY: info.api_key } });
    expect(JSON.parse(r.stdout)).toMatchObject({ authed: true, client_id: 'emulator' });
  } finally {
    emulator.kill('SIGTERM');
  }
}, 60_000);
