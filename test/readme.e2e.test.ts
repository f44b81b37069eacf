import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { expect, it } from 'vitest';
import { freePort } from '../scripts/harness.js';
import { runCli, tempDir } from './helpers/cli.js';
import { startInProcess } from './helpers/context.js';
import { startCliInProcess } from './helpers/process.js';
import { sendJson, startServer } from './helpers/server.js';

// The README's hand-run quick start, its lines run as written (only the fixed ports are swapped for free
// ones, and `localhost:3000` for a small app of the test's own): a step that does not work fails here.

const README = readFileSync(resolve(import.meta.dirname, '../README.md'), 'utf8');

/** The `wxhooks …` lines of the sh block that follows `after` in the README, comments dropped. */
function commandsAfter(after: string): string[][] {
  const from = README.indexOf(after);
  expect(from, `the README has "${after}"`).toBeGreaterThan(-1);
  const block = /```sh\n([\s\S]*?)```/.exec(README.slice(from))![1]!;
  return block
    .split('\n')
    .map((l) => l.replace(/#.*$/, '').trim())
    .filter((l) => l.startsWith('wxhooks '))
    .map((l) => l.split(/\s+/).slice(1));
}

it('the quick start by hand: emulator, webhook create, listen, trigger run; then listen --forward-to your app', async () => {
  const [emulator, create, listen, trigger] = commandsAfter('The same by hand');
  expect(emulator).toEqual(['emulator']);
  const [forward] = commandsAfter('the same deliveries go on to it');
  const emulatorPort = String(await freePort());
  const listenPort = String(await freePort());
  const ports = (args: string[]) => args.map((a) => a.replace('8788', emulatorPort).replace('8787', listenPort));
  const dir = tempDir();

  // 1: the emulator, and the export line it prints
  const emu = startCliInProcess([...emulator!, '--port', emulatorPort], { WXHOOKS_CONFIG_DIR: dir });
  try {
    const exportLine = await emu.waitFor<string>((l) => typeof l === 'string' && l.trim().startsWith('export WX_BASE_URL='));
    const env: Record<string, string> = { WXHOOKS_CONFIG_DIR: dir };
    for (const [, k, v] of exportLine.matchAll(/(\w+)=(\S+)/g)) env[k!] = v!;
    expect(env.WX_API_KEY).toMatch(/^wb_/); // as the README says it prints

    // 2: the webhook, then listen for it
    const created = await runCli(ports(create!), { env });
    expect(created.code).toBe(0);
    expect(created.stdout).toContain('Created webhook 1'); // the id the README's next line uses
    const run = startInProcess(ports(listen!).concat(['--port', listenPort]), { env });
    await run.waitForStderr('Ready.');
    // 3: a short model run
    expect((await runCli(trigger!, { env })).code).toBe(0);
    // the webhook is subscribed to forecast_hour.available: +0h, +6h and +12h, each verified
    const verified = () => run.lines().filter((l) => typeof l === 'string' && l.includes('✓ 200 '));
    await run.waitFor<string>(() => verified().length >= 3);
    expect(verified().join('\n')).toMatch(/\+0h[\s\S]*\+6h[\s\S]*\+12h/);
    expect(await run.stop()).toBe(130);

    // then the same deliveries forwarded to an app (here the test's own, for localhost:3000)
    const app = await startServer((req, res) => sendJson(res, 200, { stored: (req.json as { trigger_id: string }).trigger_id }));
    try {
      const withApp = ports(forward!)
        .map((a) => a.replace('http://localhost:3000', app.url))
        .concat(['--port', listenPort]);
      const again = startInProcess(withApp, { env });
      await again.waitForStderr('Ready.');
      expect((await runCli([...trigger!, '--init-time', '2026-11-22T06:00:00Z'], { env })).code).toBe(0);
      await again.waitFor<string>(() => again.lines().filter((l) => typeof l === 'string' && l.includes('→ app 200')).length >= 3);
      expect(app.requests).toHaveLength(3);
      await again.stop();
    } finally {
      await app.close();
    }
  } finally {
    await emu.stop();
  }
});
