import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmulator, type RunningEmulator } from '../../src/emulator/server.js';
import { runInTerminal, tempDir } from '../helpers/cli.js';

// What a newcomer at a terminal ran into (issue #27), where a pseudo-terminal (python3) is the point; the
// other points: test/first-ten-minutes.test.ts.

let emu: RunningEmulator;
let env: Record<string, string>;
beforeAll(async () => {
  emu = await startEmulator({ port: 0, retryDelays: [100] });
  env = { WX_BASE_URL: emu.url, WX_API_KEY: emu.apiKey, WXHOOKS_CONFIG_DIR: tempDir() };
});
afterAll(() => emu.close());

describe('small things', () => {
  it('23. Ctrl-C or Ctrl-D at a [y/N] prompt: exit 130, the shell prompt on a line of its own', async () => {
    for (const key of ['\u0003', '\u0004']) {
      const { code, shown } = await runInTerminal(['webhook', 'delete', '1'], '[y/N]', key, { env });
      expect(code, JSON.stringify(key)).toBe(130);
      expect(shown.endsWith('\n')).toBe(true);
    }
  });
});
