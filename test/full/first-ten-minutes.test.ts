import { describe, expect, it } from 'vitest';
import type { RunningEmulator } from '../../src/emulator/server.js';
import { runInTerminal } from '../helpers/cli.js';
import { emulatorFor } from '../helpers/emulator.js';

// What a newcomer at a terminal ran into (issue #27), where a pseudo-terminal (python3) is the point; the
// other points: test/first-ten-minutes.test.ts.

let emu: RunningEmulator;
let env: Record<string, string>;
emulatorFor({ retryDelays: [100] }, (made) => ({ emu, env } = made));

describe('small things', () => {
  it('23. Ctrl-C or Ctrl-D at a [y/N] prompt: exit 130, the shell prompt on a line of its own', async () => {
    for (const key of ['\u0003', '\u0004']) {
      const { code, shown } = await runInTerminal(['webhook', 'delete', '1'], '[y/N]', key, { env });
      expect(code, JSON.stringify(key)).toBe(130);
      expect(shown.endsWith('\n')).toBe(true);
    }
  });
});
