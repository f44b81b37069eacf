import { afterAll, beforeAll } from 'vitest';
import { startEmulator, type EmulatorOptions, type RunningEmulator } from '../../src/emulator/server.js';
import { tempDir } from './cli.js';

/** An emulator in this process, and the environment that points the CLI at it (a config folder of its own). */
export interface EmulatorEnv {
  emu: RunningEmulator;
  env: Record<string, string>;
}

/**
 * An emulator for the tests of a file or of one describe block: started (on a free port) before them and
 * given to `set`, closed after them.
 */
export function emulatorFor(options: EmulatorOptions, set: (made: EmulatorEnv) => void): void {
  let emu: RunningEmulator | undefined;
  beforeAll(async () => {
    emu = await startEmulator({ port: 0, ...options });
    set({ emu, env: { WX_BASE_URL: emu.url, WX_API_KEY: emu.apiKey, WXHOOKS_CONFIG_DIR: tempDir() } });
  });
  afterAll(() => emu?.close());
}
