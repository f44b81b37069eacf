import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { cleanEnv, tempDir } from '../helpers/cli.js';
import { runInProcess } from '../helpers/context.js';
import { startCli } from '../helpers/process.js';
import { send } from '../helpers/relay.js';
import { startWorkerdRelay } from '../helpers/workerd.js';

// `wxhooks relay serve` as the built binary (a signal is the point), and the Worker as wrangler builds it
// (offline: `wrangler deploy --dry-run`, from the npm package: packaging), both from the repository
// (relay/wrangler.toml) and from `relay worker DIR`, then run in workerd. The rest of `wxhooks relay`:
// test/relay-cli.test.ts.

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const TOKEN = `relay-token-${randomBytes(12).toString('hex')}`;

describe('relay serve, the built binary', () => {
  it('the built binary: a line to say where it listens, and SIGTERM stops it in order (143)', async () => {
    const p = startCli(['relay', 'serve', '--port', '0', '--dir', tempDir('wxhooks-relay-bin-')], { WXHOOKS_RELAY_TOKEN: TOKEN });
    const first = await p.waitFor<string>((l) => typeof l === 'string' && l.includes('wxhooks relay on'));
    expect(first).toMatch(/● wxhooks relay on http:\/\/127\.0\.0\.1:\d+ \(deliveries in .*, kept 7d, at most 256 MB\)/);
    expect(await p.stop('SIGTERM')).toBe(143);
    expect(p.lines.join('\n') + p.stderr()).not.toContain(TOKEN);
  });
});

/** Runs wrangler from the npm package, offline. */
function wrangler(args: string[], cwd: string): Promise<{ code: number; out: string }> {
  return new Promise((resolve) => {
    execFile(
      join(ROOT, 'node_modules', '.bin', 'wrangler'),
      args,
      { cwd, env: cleanEnv({ WRANGLER_SEND_METRICS: 'false', NO_COLOR: '1', HOME: tempDir('wxhooks-wrangler-home-') }), timeout: 60_000 },
      (err, stdout, stderr) => resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, out: stdout + stderr }),
    );
  });
}

describe('the Worker as wrangler deploys it', () => {
  it('`wrangler deploy --dry-run` builds it from the repository (relay/wrangler.toml) and from `relay worker DIR`, offline; what it built runs in workerd', async () => {
    const dir = join(tempDir('wxhooks-relay-worker-'), 'my-relay');
    const written = await runInProcess(['relay', 'worker', dir]);
    expect(written.code).toBe(0);
    expect(written.stdout).toContain('npx wrangler deploy');
    expect(readFileSync(join(dir, 'wrangler.toml'), 'utf8')).toMatch(/^main = "index.js"$/m);
    const again = await runInProcess(['relay', 'worker', dir]);
    expect(again.code).toBe(2);
    expect(again.stderr).toContain('already holds index.js and wrangler.toml');
    expect((await runInProcess(['relay', 'worker', dir, '--force'])).code).toBe(0);

    // both builds at once: wrangler takes seconds to start
    const outRepo = tempDir('wxhooks-wrangler-out-');
    const outDir = tempDir('wxhooks-wrangler-out-');
    const [fromRepo, fromDir] = await Promise.all([wrangler(['deploy', '--dry-run', '--outdir', outRepo], join(ROOT, 'relay')), wrangler(['deploy', '--dry-run', '--outdir', outDir], dir)]);
    rmSync(join(ROOT, 'relay', '.wrangler'), { recursive: true, force: true });
    for (const built of [fromRepo, fromDir]) {
      expect(built.code, built.out).toBe(0);
      expect(built.out).toContain('env.RELAY (RelayObject)');
      expect(built.out).toContain('env.RELAY_KEEP_SECONDS ("604800")');
      expect(built.out).toContain('--dry-run: exiting now.');
      expect(built.out).not.toContain('out-of-date'); // wrangler 3 said so at every run
      expect(built.out).not.toContain('WXHOOKS_RELAY_TOKEN:'); // a secret, never a var
    }

    // wrangler's own bundle, in the runtime, answers as the relay
    expect(existsSync(join(outRepo, 'index.js'))).toBe(true);
    const w = await startWorkerdRelay({ token: TOKEN, bundle: join(outRepo, 'index.js') });
    try {
      expect(await (await fetch(`${w.url}/health`)).json()).toEqual({ ok: true, relay: 'wxhooks' });
      const s = await send(`${w.url}/status`, 'GET', { authorization: `Bearer ${TOKEN}` });
      expect(JSON.parse(s.body)).toMatchObject({ channels: [], max_bytes: 268435456, keep_seconds: 604800 });
    } finally {
      await w.stop();
    }
  }, 60_000);
});
