import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { runRelayServe, runRelayStatus, runRelayToken, runRelayWorker } from '../src/commands/relay.js';
import { freePort } from '../scripts/harness.js';
import { generateSecret } from '../src/signing/sign.js';
import { tempDir } from './helpers/cli.js';
import { parsed, runInProcess, startInProcess } from './helpers/context.js';
import { delivery, listener, send } from './helpers/relay.js';

// `wxhooks relay`: its parsing, its refusals, `relay serve` in this process, `relay status`, `relay token`
// (`relay serve` as the built binary, and the Worker as wrangler builds it: test/full/relay-cli.test.ts).

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const TOKEN = `relay-token-${randomBytes(12).toString('hex')}`;

describe('relay: parsing and refusals', () => {
  it('serve: its defaults, and durations and sizes parsed', async () => {
    const d = await parsed(['relay', 'serve']);
    expect(d.run).toBe(runRelayServe);
    expect(d.args[0]).toMatchObject({
      port: 8790,
      host: '127.0.0.1',
      store: 'file',
      schema: 'wxhooks_relay',
      keep: 7 * 24 * 3600_000,
      maxBytes: 256 * 1024 * 1024,
      maxBody: 25 * 1024 * 1024,
      readTimeout: 10_000,
    });
    const o = await parsed(['relay', 'serve', '--keep', '3d', '--max-bytes', '1GiB', '--port', '0', '--fsync']);
    expect(o.args[0]).toMatchObject({ keep: 3 * 24 * 3600_000, maxBytes: 1024 ** 3, port: 0, fsync: true });
    expect((await parsed(['relay', 'status', 'https://r.example'])).run).toBe(runRelayStatus);
    expect((await parsed(['relay', 'token'])).run).toBe(runRelayToken);
    expect((await parsed(['relay', 'worker', 'dir'])).run).toBe(runRelayWorker);
  });

  it('serve without WXHOOKS_RELAY_TOKEN, with a short one, with a store it cannot use, or a bad flag: exit 2, saying what to do', async () => {
    const none = await runInProcess(['relay', 'serve', '--port', '0']);
    expect(none.code).toBe(2);
    expect(none.stderr).toContain('WXHOOKS_RELAY_TOKEN is not set');
    expect(none.stderr).toContain('wxhooks relay token');
    const short = await runInProcess(['relay', 'serve', '--port', '0'], { env: { WXHOOKS_RELAY_TOKEN: 'short' } });
    expect(short.code).toBe(2);
    expect(short.stderr).toContain('at least 16');
    expect(short.stderr).not.toContain("'short'");
    const store = await runInProcess(['relay', 'serve', '--port', '0', '--store', 'mysql://x'], { env: { WXHOOKS_RELAY_TOKEN: TOKEN } });
    expect(store.code).toBe(2);
    expect(store.stderr).toContain('--store must be "file" or a postgres:// URL');
    const dir = await runInProcess(['relay', 'serve', '--port', '0', '--store', 'postgres://u:pw@127.0.0.1:1/db', '--dir', 'x'], { env: { WXHOOKS_RELAY_TOKEN: TOKEN } });
    expect(dir.code).toBe(2);
    expect(dir.stderr).toContain('--dir is for --store file');
    const keep = await runInProcess(['relay', 'serve', '--keep', '0'], { env: { WXHOOKS_RELAY_TOKEN: TOKEN } });
    expect(keep.code).toBe(2);
    for (const r of [store, dir, keep]) expect(r.stderr).not.toContain(TOKEN);
  });

  it("serve --store postgres://…: opened as the stores open theirs (a schema's name checked: exit 2; a server away: exit 6 naming the host, never the password)", async () => {
    const env = { WXHOOKS_RELAY_TOKEN: TOKEN };
    const schema = await runInProcess(['relay', 'serve', '--port', '0', '--store', 'postgres://u:pw@127.0.0.1:1/db', '--schema', 'Bad-Name'], { env });
    expect(schema.code).toBe(2);
    expect(schema.stderr).toContain('--schema must be a lowercase SQL name');
    const port = await freePort();
    const away = await runInProcess(['relay', 'serve', '--port', '0', '--store', `postgres://relay:hunter2-relay-pw@127.0.0.1:${port}/db`], { env });
    expect(away.code).toBe(6);
    expect(away.stderr).toContain(`Cannot use the PostgreSQL store at 127.0.0.1:${port}`);
    expect(away.stderr).toContain('--store');
    expect(away.stderr).not.toContain('hunter2-relay-pw');
  });

  it('token: a new random one each time, long enough for serve', async () => {
    const a = await runInProcess(['relay', 'token']);
    const b = await runInProcess(['relay', 'token', '--json']);
    expect(a.code).toBe(0);
    expect(a.stdout.trim()).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(JSON.parse(b.stdout).token).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(JSON.parse(b.stdout).token).not.toBe(a.stdout.trim());
  });
});

describe('relay serve and relay status', () => {
  it('serves in this process; status shows each channel and what waits in it (never a secret); a wrong token is exit 3, a relay away exit 6; Ctrl-C stops it (130)', async () => {
    const dir = tempDir('wxhooks-relay-serve-');
    const run = startInProcess(['relay', 'serve', '--port', '0', '--dir', dir, '--json'], { env: { WXHOOKS_RELAY_TOKEN: TOKEN } });
    const listening = await run.waitFor<{ event?: string; url: string; store: string }>((l) => l.event === 'listening');
    expect(listening.store).toBe(dir);
    const secret = generateSecret();
    const l = listener({ url: listening.url, token: TOKEN, channel: 'status-ch', secrets: [secret] });
    await l.client.start();
    await l.client.close();
    const d = delivery(secret, 'trg_waiting');
    expect((await send(`${listening.url}/in/status-ch`, 'POST', d.headers, d.body)).status).toBe(200);
    await run.waitFor<{ outcome?: string; seq?: number }>((e) => e.outcome === 'accepted' && e.seq === 1);

    const text = await runInProcess(['relay', 'status', listening.url], { env: { WXHOOKS_RELAY_TOKEN: TOKEN } });
    expect(text.code).toBe(0);
    expect(text.stdout).toMatch(/^1 channel; .* used; deliveries kept 7d/);
    expect(text.stdout).toMatch(/CHANNEL\tKIND\tCONNECTED\tQUEUED\tREFUSED\tBYTES\tOLDEST\nstatus-ch\tlasting\tno\t1\t0\t/);
    const json = await runInProcess(['relay', 'status', listening.url, '--json'], { env: { WXHOOKS_RELAY_TOKEN: TOKEN } });
    expect(JSON.parse(json.stdout)).toMatchObject({ channels: [{ channel: 'status-ch', temporary: false, connected: false, queued: 1 }], queued: 1 });
    const wrong = await runInProcess(['relay', 'status', listening.url], { env: { WXHOOKS_RELAY_TOKEN: `${TOKEN}-wrong` } });
    expect(wrong.code).toBe(3);
    expect(wrong.stderr).toContain('The relay refused the token: the relay token is wrong.');
    const away = await runInProcess(['relay', 'status', `http://127.0.0.1:${await freePort()}`], { env: { WXHOOKS_RELAY_TOKEN: TOKEN } });
    expect(away.code).toBe(6);
    expect(away.stderr).toContain('connection refused');

    expect(await run.stop('SIGINT')).toBe(130);
    const all = [run.io.stdout.text, run.io.stderr.text, text.stdout, json.stdout, wrong.stderr].join('\n');
    for (const s of [secret, secret.slice(6), TOKEN]) expect(all).not.toContain(s);
    // what was waiting is still there after the stop
    const again = startInProcess(['relay', 'serve', '--port', '0', '--dir', dir, '--json'], { env: { WXHOOKS_RELAY_TOKEN: TOKEN } });
    const back = await again.waitFor<{ event?: string; url: string }>((e) => e.event === 'listening');
    const l2 = listener({ url: back.url, token: TOKEN, channel: 'status-ch' });
    await l2.client.start();
    await l2.until(() => l2.got.length === 1, 'what waited');
    expect(l2.triggers()).toEqual(['trg_waiting']);
    await l2.client.close();
    await again.stop('SIGINT');
  });

  it('a client started while the relay is down says so at every try, keeps trying, and opens the channel when the relay comes', async () => {
    const port = await freePort();
    const l = listener({ url: `http://127.0.0.1:${port}`, token: TOKEN, channel: 'late-relay', secrets: [generateSecret()], random: () => 1 });
    const ready = l.client.start();
    await l.until(() => l.events.some((e) => e.kind === 'unreachable'), 'unreachable');
    expect(l.events).toEqual([{ kind: 'unreachable', reason: 'connection refused', retryInMs: 500, attempt: 1 }]);
    const run = startInProcess(['relay', 'serve', '--port', String(port), '--dir', tempDir('wxhooks-relay-late-'), '--json'], { env: { WXHOOKS_RELAY_TOKEN: TOKEN } });
    try {
      await run.waitFor<{ event?: string }>((e) => e.event === 'listening');
      let opened = false;
      void ready.then(() => (opened = true));
      // its back-off passes (the client's clock is the test's), a turn of the event loop at a time, until it is in
      while (!opened) {
        l.clock.advance(30_000);
        await new Promise((r) => setImmediate(r));
      }
      expect(await ready).toMatchObject({ channel: 'late-relay', created: true });
      const kinds = l.events.map((e) => e.kind);
      expect(kinds.at(-1)).toBe('connected');
      expect(new Set(kinds.slice(0, -1))).toEqual(new Set(['unreachable']));
      // one line at every try, numbered
      expect(l.events.slice(0, -1).map((e) => (e as { attempt: number }).attempt)).toEqual(kinds.slice(0, -1).map((_, i) => i + 1));
      expect(l.events.at(-1)).toMatchObject({ again: false, downMs: expect.any(Number) });
      await l.client.close({ deleteChannel: true });
    } finally {
      await run.stop('SIGINT');
    }
  });
});

/** docs/relay.md, and the shell block after `heading` with its sample output (the next block), checked to be marked as tested by this file. */
function guideBlocks(heading: string): [string, string | undefined] {
  const guide = readFileSync(join(ROOT, 'docs', 'relay.md'), 'utf8');
  const from = guide.indexOf(heading);
  expect(from).toBeGreaterThan(-1);
  const part = guide.slice(from);
  expect(part).toMatch(/<!-- tested: test\/relay-cli\.test\.ts -->\n```sh\n/);
  const [block, sample] = [...part.matchAll(/```(?:sh)?\n([\s\S]*?)```/g)].slice(0, 2).map((m) => m[1]!);
  return [block!, sample];
}

/** The `wxhooks` lines of a block, each as its arguments. */
const wxhooksLines = (block: string) => [...block.matchAll(/wxhooks ((?:relay|deliveries) [^#\n)]*)/g)].map((m) => m[1]!.trim().split(/\s+/));

describe("docs/relay.md's relay on a VM", () => {
  it('its lines run as written (the port and the address swapped for the test): relay token, relay serve, relay status, whose output looks as shown', async () => {
    const [block, sample] = guideBlocks('## On a small VM');
    const lines = wxhooksLines(block);
    expect(lines.map((l) => l.slice(0, 2).join(' '))).toEqual(['relay token', 'relay serve', 'relay serve', 'relay status']);
    const [token, serve, serveStore, status] = lines;

    const made = await runInProcess(token!);
    const env = { WXHOOKS_RELAY_TOKEN: made.stdout.trim() };
    expect((await parsed(serveStore!)).args[0]).toMatchObject({ store: 'postgres://relay:pw@db/relay', keep: 3 * 86_400_000, maxBytes: 1024 ** 3 });
    const run = startInProcess([...serve!, '--port', '0', '--json'], { env });
    try {
      const { url } = await run.waitFor<{ event?: string; url: string }>((l) => l.event === 'listening');
      const secret = generateSecret();
      const l = listener({ url, token: env.WXHOOKS_RELAY_TOKEN, channel: 'webhook-7', secrets: [secret] });
      await l.client.start();
      await l.client.close();
      const d = delivery(secret, 'trg_readme');
      expect((await send(`${url}/in/webhook-7`, 'POST', d.headers, d.body)).status).toBe(200);
      const shown = await runInProcess(
        status!.map((a) => (a.startsWith('https://') ? url : a)),
        { env, tty: true },
      );
      expect(shown.code).toBe(0);
      const [head, columns, row] = shown.stdout.split('\n');
      const [sampleHead, sampleColumns, sampleRow] = sample!.split('\n');
      const shape = (line: string) =>
        line
          .replace(/[\d.]+ (KB|B|MB)/g, 'N')
          .replace(/\d{4}-\S+Z/, 'T')
          .split(/\s+/);
      expect(shape(head!)).toEqual(shape(sampleHead!));
      expect(columns!.split(/\s+/)).toEqual(sampleColumns!.split(/\s+/));
      expect(shape(row!)).toEqual(shape(sampleRow!));
    } finally {
      await run.stop('SIGINT');
    }
  });
});

describe("docs/relay.md's refused deliveries", () => {
  it("its lines run as written (the address swapped), with webhook 7's secret and no relay token: one channel's status, the refused listed twice, one dropped, then the rest", async () => {
    const [block] = guideBlocks('## Refused deliveries');
    const lines = wxhooksLines(block);
    expect(lines.map((l) => l.slice(0, 2).join(' '))).toEqual(['relay status', 'relay refused', 'deliveries list', 'relay drop', 'relay drop']);
    const run = startInProcess(['relay', 'serve', '--port', '0', '--dir', tempDir('wxhooks-relay-refused-'), '--json'], { env: { WXHOOKS_RELAY_TOKEN: TOKEN } });
    try {
      const { url } = await run.waitFor<{ event?: string; url: string }>((l) => l.event === 'listening');
      // this machine: webhook 7's secret stored, its lasting channel noted; no relay token
      const env = { WXHOOKS_CONFIG_DIR: tempDir('wxhooks-relay-refused-cfg-'), WX_BASE_URL: 'http://127.0.0.1:9' };
      const secret = generateSecret();
      expect((await runInProcess(['secret', 'set', '7'], { env, stdin: `${secret}\n` })).code).toBe(0);
      const { lastingChannel } = await import('../src/relay/channels.js');
      const { channel } = await lastingChannel({ dir: env.WXHOOKS_CONFIG_DIR, relay: url, base: env.WX_BASE_URL, webhook: '7' });
      const opened = listener({ url, token: TOKEN, channel, secrets: [secret] });
      await opened.client.start();
      await opened.client.close();
      for (let i = 1; i <= 3; i++) expect((await send(`${url}/in/${channel}`, 'POST', delivery(secret, `trg_doc_${i}`).headers, delivery(secret, `trg_doc_${i}`).body)).status).toBe(200);
      const refusing = listener({
        url,
        channel,
        secrets: [secret],
        handle: () => ({ refused: { reason: 'timestamp_out_of_window', message: 'The timestamp is 100 s old; at most 60 s either way is accepted.' } }),
      });
      await refusing.client.start();
      await refusing.until(() => refusing.got.length === 3, 'the three, refused');
      await refusing.client.close();
      for (let i = 0; ; i++) {
        const s = JSON.parse((await send(`${url}/status`, 'GET', { authorization: `Bearer ${TOKEN}` })).body) as { refused: number };
        if (s.refused === 3) break;
        if (i > 500) throw new Error(`the relay holds ${s.refused} refused, not 3`);
        await new Promise((r) => setTimeout(r, 10));
      }

      const ran = [];
      for (const args of lines) {
        const r = await runInProcess(
          args.map((a) => (a.startsWith('https://') ? url : a)),
          { env },
        );
        expect(r.code, `${args.join(' ')}: ${r.stderr}`).toBe(0);
        ran.push(r.stdout);
      }
      const [status, refused, asDeliveries, dropOne, dropAll] = ran;
      expect(status).toMatch(new RegExp(`${channel}\\tlasting\\tno\\t0\\t3\\t`));
      expect(refused!.split('\n').filter((l) => l.includes('timestamp_out_of_window'))).toHaveLength(3);
      expect(asDeliveries!.split('\n').filter((l) => l.includes('unverified'))).toHaveLength(3);
      expect(dropOne).toContain('Dropped 1 refused delivery');
      expect(dropAll).toContain('Dropped 2 refused deliveries');
      for (const out of ran) expect(out).not.toContain(secret);
    } finally {
      await run.stop('SIGINT');
    }
  });
});

describe('listen --relay: the flags', () => {
  it('refuses --relay without WXHOOKS_RELAY_TOKEN, and with --port, --host or --public-url (exit 2, naming both)', async () => {
    const env = { WX_BASE_URL: 'http://127.0.0.1:9', WX_API_KEY: 'k', WXHOOKS_CONFIG_DIR: tempDir() };
    const noToken = await runInProcess(['listen', '--relay', 'http://127.0.0.1:9'], { env });
    expect(noToken.code).toBe(2);
    expect(noToken.stderr).toContain('WXHOOKS_RELAY_TOKEN is not set');
    for (const [flag, value] of [
      ['--port', '8787'],
      ['--host', '0.0.0.0'],
      ['--public-url', 'https://x.example'],
    ]) {
      const r = await runInProcess(['listen', '--relay', 'http://127.0.0.1:9', flag!, value!], { env: { ...env, WXHOOKS_RELAY_TOKEN: TOKEN } });
      expect(r.code).toBe(2);
      expect(r.stderr).toContain(`--relay cannot go with ${flag}`);
      expect(r.stderr).not.toContain(TOKEN);
    }
    const bad = await runInProcess(['listen', '--relay', 'ftp://x'], { env: { ...env, WXHOOKS_RELAY_TOKEN: TOKEN } });
    expect(bad.code).toBe(2);
  });
});
