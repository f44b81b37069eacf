import { randomBytes } from 'node:crypto';
import { readdirSync, statSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ExitCode, RefusedError } from '../../src/errors.js';
import { FileRelayStorage } from '../../src/relay/file-storage.js';
import { startRelayServer, type RunningRelay } from '../../src/relay/node-host.js';
import { generateSecret } from '../../src/signing/sign.js';
import { tempDir } from '../helpers/cli.js';
import { delivery, listener, send, type Answered } from '../helpers/relay.js';
import { startWorkerdRelay, type WorkerdRelay } from '../helpers/workerd.js';

// The relay's edge as an anonymous sender, or a token holder, would probe it: which channels exist
// (#41.14), how many a token holder may make and how much disk a flood of small deliveries takes
// (#41.15), and how long a sender trickling its headers is kept (#41.18). Against the Node host (in
// this process, over a folder) and the Worker in workerd where the host is not the point.

const TOKEN = `relay-token-${randomBytes(12).toString('hex')}`;
const SECRET = generateSecret();

interface Host {
  url: string;
  close(): Promise<void>;
}

async function nodeHost(o: { maxChannels?: number; maxBytes?: number; readTimeoutMs?: number; dir?: string } = {}): Promise<Host & { dir: string; running: RunningRelay }> {
  const dir = o.dir ?? tempDir('wxhooks-relay-hostile-');
  const storage = await FileRelayStorage.open({ dir });
  const running = await startRelayServer({ host: '127.0.0.1', port: 0, storage, token: TOKEN, maxChannels: o.maxChannels, maxBytes: o.maxBytes, readTimeoutMs: o.readTimeoutMs });
  return {
    url: running.url,
    dir,
    running,
    async close() {
      await running.close();
      await storage.close();
    },
  };
}

async function workerdHost(vars: Record<string, string> = {}): Promise<Host & { workerd: WorkerdRelay }> {
  const workerd = await startWorkerdRelay({ token: TOKEN, vars });
  return { url: workerd.url, workerd, close: () => workerd.stop() };
}

/** A channel made with the relay token and the webhook's secret, with no listen on it. */
async function made(url: string, channel: string, o: { tolerance?: number } = {}): Promise<void> {
  const l = listener({ url, token: TOKEN, channel, secrets: [SECRET], ...o });
  await l.client.start();
  await l.client.close();
}

/** A forgery: the headers a delivery has, a signature of the right shape that no secret made. */
function forged(trigger: string, timestamp = Math.floor(Date.now() / 1000)): { headers: Record<string, string>; body: Buffer } {
  const body = Buffer.from(JSON.stringify({ type: 'forecast_hour.available', subscription_id: '3', trigger_id: trigger, data: { model: 'wm-6' } }));
  return { headers: { 'content-type': 'application/json', 'trigger-id': trigger, 'webhook-timestamp': String(timestamp), 'webhook-signature': `v1,${randomBytes(32).toString('base64')}` }, body };
}

/** What an answer says; a stale timestamp's stated age is counted as each request arrives, and a second may pass between two of them. */
const said = (a: Answered) => `${a.status} ${a.body.replace(/The timestamp is \d+ s old/, 'The timestamp is N s old')}`;

for (const [name, start] of [
  ['the Node host', () => nodeHost()],
  ['the Worker (workerd)', () => workerdHost()],
] as const) {
  describe(`#41.14 an anonymous sender cannot tell which channels exist (${name})`, () => {
    let host: Host;
    beforeAll(async () => {
      host = await start();
    }, 60_000);
    afterAll(async () => {
      await host?.close();
    });

    it('a name that is no channel is answered as a channel answers a forgery: the same status and the same words, for every kind of request', async () => {
      const known = `keep-${randomBytes(4).toString('hex')}`;
      const narrow = `narrow-${randomBytes(4).toString('hex')}`;
      await made(host.url, known);
      await made(host.url, narrow, { tolerance: 60 });
      const unknown = `wh-7-${randomBytes(10).toString('hex')}`;
      const now = Math.floor(Date.now() / 1000);
      const cases: [string, () => { headers: Record<string, string>; body: Buffer }][] = [
        ['a forged signature', () => forged('trg_probe')],
        ['a forged signature, 100 s old (within the relay window, outside a narrow listen)', () => forged('trg_probe_old', now - 100)],
        ['stale', () => forged('trg_probe_stale', now - 400)],
        ['no signature', () => ({ headers: { ...forged('trg_probe_bare').headers, 'webhook-signature': '' }, body: Buffer.from('{}') })],
        ['a signature with the right secret of another channel', () => delivery(generateSecret(), 'trg_probe_other')],
      ];
      for (const [what, make] of cases) {
        const d = make();
        const [a, b, c] = [
          await send(`${host.url}/in/${known}`, 'POST', d.headers, d.body),
          await send(`${host.url}/in/${narrow}`, 'POST', d.headers, d.body),
          await send(`${host.url}/in/${unknown}`, 'POST', d.headers, d.body),
        ];
        expect(a.status, what).toBeGreaterThanOrEqual(400);
        if (what === 'stale') expect(a.body).toMatch(/The timestamp is 4\d\d s old/);
        expect(said(c), what).toBe(said(a));
        expect(said(b), what).toBe(said(a));
      }
      // nor a connection with what may be a channel's key
      const key = {
        authorization: `Bearer wxrc1.${randomBytes(32).toString('base64url')}`,
        connection: 'upgrade',
        upgrade: 'websocket',
        'sec-websocket-version': '13',
        'sec-websocket-key': randomBytes(16).toString('base64'),
      };
      const [k, u] = [await send(`${host.url}/connect/${known}`, 'GET', key), await send(`${host.url}/connect/${unknown}`, 'GET', key)];
      expect(k.status).toBe(401);
      expect(said(u)).toBe(said(k));
      const [sk, su] = [
        await send(`${host.url}/channels/${known}`, 'GET', { authorization: key.authorization }),
        await send(`${host.url}/channels/${unknown}`, 'GET', { authorization: key.authorization }),
      ];
      expect(sk.status).toBe(401);
      expect(said(su)).toBe(said(sk));
    });
  });
}

describe('#41.15 a token holder cannot make channels without end', () => {
  for (const [name, start] of [
    ['the Node host', () => nodeHost({ maxChannels: 3 })],
    ['the Worker (workerd)', () => workerdHost({ RELAY_MAX_CHANNELS: '3' })],
  ] as const) {
    it(`past --max-channels (RELAY_MAX_CHANNELS) no channel is created: the client is told why, and stops with exit 5 (${name})`, async () => {
      const host = await start();
      try {
        for (let i = 0; i < 3; i++) await made(host.url, `ch-${i}`);
        const fourth = listener({ url: host.url, token: TOKEN, channel: 'ch-3', secrets: [SECRET] });
        const err = await fourth.client.start().catch((e: unknown) => e);
        expect(err).toBeInstanceOf(RefusedError);
        expect((err as RefusedError).exitCode).toBe(ExitCode.REFUSED);
        expect((err as Error).message).toContain('creates no more channels');
        const s = JSON.parse((await send(`${host.url}/status`, 'GET', { authorization: `Bearer ${TOKEN}` })).body) as { channels: unknown[]; max_channels: number };
        expect(s).toMatchObject({ max_channels: 3 });
        expect(s.channels).toHaveLength(3);
        // the channels there still open
        await made(host.url, 'ch-0');
      } finally {
        await host.close();
      }
    }, 60_000);
  }
});

/** What a folder takes on the disk: its files' blocks (what `du` counts), not their lengths. */
function diskBytes(dir: string): number {
  let n = 0;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    n += e.isDirectory() ? diskBytes(p) : statSync(p).blocks * 512;
  }
  return n;
}

describe('#41.15 the file store counts what small deliveries take on the disk', () => {
  it('a flood of small deliveries stops at --max-bytes of disk (whole blocks counted), answered 503, not at ten times it', async () => {
    const maxBytes = 256 * 1024;
    const host = await nodeHost({ maxBytes });
    try {
      await made(host.url, 'small');
      let accepted = 0;
      let full: Answered | undefined;
      for (let i = 0; i < 400 && !full; i++) {
        const d = delivery(SECRET, `trg_small_${i}`);
        const a = await send(`${host.url}/in/small`, 'POST', d.headers, d.body);
        if (a.status === 200) accepted++;
        else full = a;
      }
      expect(full?.status).toBe(503);
      // what the deliveries take, and the channel's record besides
      const channels = join(host.dir, 'channels');
      expect(diskBytes(channels)).toBeLessThanOrEqual(maxBytes + 2 * 4096);
      expect(accepted).toBeGreaterThan(10);
      const s = JSON.parse((await send(`${host.url}/status`, 'GET', { authorization: `Bearer ${TOKEN}` })).body) as { bytes: number };
      expect(s.bytes).toBeLessThanOrEqual(maxBytes);
      expect(s.bytes).toBeGreaterThanOrEqual(diskBytes(channels) - 2 * 4096);
    } finally {
      await host.close();
    }
  }, 60_000);
});

describe('#41.18 a sender trickling its headers is cut at --read-timeout', () => {
  it('relay serve closes a connection whose headers are not in within --read-timeout, a byte at a time or not', async () => {
    const readTimeoutMs = 1000;
    const host = await nodeHost({ readTimeoutMs });
    const sockets: Socket[] = [];
    try {
      const cut = (trickle: boolean) =>
        new Promise<number>((resolve, reject) => {
          const began = performance.now();
          const s = connect(Number(new URL(host.url).port), '127.0.0.1');
          sockets.push(s);
          s.on('error', () => undefined);
          s.resume(); // its 408 read, so that the close that follows is seen
          let timer: NodeJS.Timeout | undefined;
          s.on('connect', () => {
            s.write('POST /in/small HTTP/1.1\r\nHost: relay\r\n');
            if (trickle) timer = setInterval(() => s.write('X'), 100);
          });
          s.on('close', () => {
            clearInterval(timer);
            resolve(performance.now() - began);
          });
          // a guard against a hang: the old relay kept such a sender 13-45 s
          setTimeout(() => reject(new Error('the slow sender was not cut within 8 s')), 8000).unref();
        });
      const [trickled, stalled] = await Promise.all([cut(true), cut(false)]);
      // within the read timeout and the one-second look for late connections (and a loaded machine's slack)
      expect(trickled).toBeLessThan(readTimeoutMs + 2500);
      expect(stalled).toBeLessThan(readTimeoutMs + 2500);
      expect(trickled).toBeGreaterThanOrEqual(readTimeoutMs - 50);
    } finally {
      for (const s of sockets) s.destroy();
      await host.close();
    }
  }, 20_000);
});
