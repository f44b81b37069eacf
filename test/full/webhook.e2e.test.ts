import { describe, expect, it } from 'vitest';
import { runCli, runInTerminal, tempDir } from '../helpers/cli.js';

// `secret set` on a real terminal (a pseudo-terminal, through python3). The rest of the webhook and secret
// commands: test/webhook.e2e.test.ts.

describe('the secret is never lost', () => {
  it('secret set on a terminal does not show what is pasted; Backspace edits it; Ctrl-C stores nothing', async () => {
    const dir = tempDir();
    const env = { WX_BASE_URL: 'http://127.0.0.1:1', WXHOOKS_CONFIG_DIR: dir };
    const set = await runInTerminal(['secret', 'set', '7'], 'press Enter', 'whsec_pastedX\u007fd\r', { env });
    expect(set.code).toBe(0);
    expect(set.shown).toContain('it is not shown');
    expect(set.shown).toContain('Stored the secret of webhook 7');
    expect(set.shown).not.toContain('whsec_');
    expect((await runCli(['secret', 'show', '7'], { env })).stdout).toBe('whsec_pastedd\n');

    const interrupted = await runInTerminal(['secret', 'set', '8'], 'press Enter', 'whsec_half\u0003', { env });
    expect(interrupted.code).toBe(130);
    expect(interrupted.shown).not.toContain('whsec_');
    expect((await runCli(['secret', 'show', '8'], { env })).code).toBe(4);
  });
});
