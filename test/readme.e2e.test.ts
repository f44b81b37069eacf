import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { expect, it } from 'vitest';
import { freePort } from '../scripts/harness.js';
import { runCli, tempDir } from './helpers/cli.js';
import { startInProcess } from './helpers/context.js';
import { startCliInProcess } from './helpers/process.js';
import { shBlockAfter, swapped, wxhooksCommands } from './helpers/guide.js';
import { sendJson, startServer } from './helpers/server.js';

// The README's first road (receive on your machine and forward to your app), its lines run as written:
// only the fixed ports are swapped for free ones, and `localhost:3000` for a small app of the test's own.
// A step that does not work fails here.

const README = readFileSync(resolve(import.meta.dirname, '../README.md'), 'utf8');

it('the first road: emulator, webhook create, listen --forward-to your app --inspect, trigger run', async () => {
  const [emulator, create, listen, trigger, ...rest] = wxhooksCommands(shBlockAfter(README, '### Receive on your machine and forward to your app').body);
  expect(rest).toEqual([]);
  expect(emulator).toEqual(['emulator']);
  const emulatorPort = String(await freePort());
  const listenPort = String(await freePort());
  const app = await startServer((req, res) => sendJson(res, 200, { stored: (req.json as { trigger_id: string }).trigger_id }));
  const swaps = { '8788': emulatorPort, '8787': listenPort, 'http://localhost:3000': app.url };
  const dir = tempDir();

  // 1: the emulator, and the export line it prints
  const emu = startCliInProcess([...emulator!, '--port', emulatorPort], { WXHOOKS_CONFIG_DIR: dir });
  try {
    const exportLine = await emu.waitFor<string>((l) => typeof l === 'string' && l.trim().startsWith('export WX_BASE_URL='));
    const env: Record<string, string> = { WXHOOKS_CONFIG_DIR: dir };
    for (const [, k, v] of exportLine.matchAll(/(\w+)=(\S+)/g)) env[k!] = v!;
    expect(env.WX_API_KEY).toMatch(/^wb_/); // as the README says it prints

    // 2: the webhook, then listen for it, forwarding to the app, with the inspector (on a free port: its default is 8789)
    const created = await runCli(swapped(create!, swaps), { env });
    expect(created.code).toBe(0);
    expect(created.stdout).toContain('Created webhook 1'); // the id the README's next line uses
    expect(listen!.at(-1)).toBe('--inspect');
    const run = startInProcess([...swapped(listen!, swaps), `127.0.0.1:${await freePort()}`, '--port', listenPort], { env });
    await run.waitForStderr('Inspector: ');
    // 3: a short model run: +0h, +6h and +12h, each verified and taken by the app
    expect((await runCli(trigger!, { env })).code).toBe(0);
    await run.waitFor<string>(() => run.lines().filter((l) => typeof l === 'string' && l.includes('✓ 200 ') && l.includes('→ app 200')).length >= 3);
    expect(app.requests.map((r) => (r.json as { data: { forecast_hour: number } }).data.forecast_hour).sort((a, b) => a - b)).toEqual([0, 6, 12]);
    // the link it prints opens the page
    const link = /Inspector: (\S+)/.exec(run.io.stderr.text)![1]!;
    expect((await fetch(link)).status).toBe(200);
    expect(await run.stop()).toBe(130);
  } finally {
    await emu.stop();
    await app.close();
  }
});
