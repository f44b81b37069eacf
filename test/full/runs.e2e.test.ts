import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../../scripts/harness.js';
import { startEmulator, type RunningEmulator } from '../../src/emulator/server.js';
import { runCli, runInTerminal, tempDir } from '../helpers/cli.js';

// `listen --until-run` on a real terminal (a pseudo-terminal, through python3): its progress line. The
// run tracker and the rest of `runs`: test/runs.e2e.test.ts.

describe('end to end with the emulator', () => {
  let emu: RunningEmulator;
  let env: Record<string, string>;
  let webhook: string;
  let port: number;
  const INIT = '2026-11-22T00:00:00Z';

  beforeAll(async () => {
    emu = await startEmulator({ port: 0, retryDelays: [100] });
    env = { WX_BASE_URL: emu.url, WX_API_KEY: emu.apiKey, WXHOOKS_CONFIG_DIR: tempDir() };
    port = await freePort();
    const created = await runCli(['webhook', 'create', '--url', `http://127.0.0.1:${port}/`, '--subscribe', 'forecast_hour.available', '--subscribe', 'initialization_time.available', '--json'], {
      env,
    });
    webhook = (JSON.parse(created.stdout) as { id: string }).id;
  });
  afterAll(() => emu.close());

  const trigger = (args: string[]) => runCli(['trigger', 'run', '--model', 'wm-6', '--init-time', INIT, ...args], { env });

  it('on a terminal, the progress line renders, and the delivery lines scroll above it', async () => {
    const terminal = runInTerminal(['listen', '--port', String(port), '--webhook', webhook, '--until-run', `wm-6@${INIT}`, '--expect-hours', '0-12/6'], 'waiting for', '', { env });
    await terminal.prompted; // listen is ready: its progress line says what it waits for
    await trigger(['--hours', '0-12/6', '--interval', '50ms']);
    const { code, shown } = await terminal;
    expect(code).toBe(0);
    // cut to the terminal's 80 columns, so that it never wraps
    expect(shown).toMatch(/wm-6 2026-11-22T00Z ▕.*▏ 3\/3 hours, \+0h-\+12h\/6 in, waiting on its initi/);
    expect(shown).toMatch(/▏ 3\/3 hours, \+0h-\+12h\/6 in, complete/);
    // each delivery line is written after the progress line is cleared, and the progress line is drawn again after it
    const clear = '\r\u001b[2K';
    const deliveryLines = shown.split(clear).filter((part) => part.includes('forecast_hour.available'));
    expect(deliveryLines.length).toBeGreaterThanOrEqual(3);
    for (const part of deliveryLines) expect(part).toMatch(/forecast_hour\.available[\s\S]*\n[\s\S]*wm-6 2026-11-22T00Z ▕/);
  });
});
