import { Agent, request } from 'node:http';
import { connect, type Socket } from 'node:net';
import { StringDecoder } from 'node:string_decoder';
import { describe, expect, it } from 'vitest';
import { freePort } from '../../../scripts/harness.js';
import { sharedBrowser } from '../../helpers/services.js';
import { History } from '../../../src/receiver/history.js';
import { startInspector } from '../../../src/receiver/inspector.js';
import { CLAIM_KEPT } from '../../../src/store/history-limits.js';
import { memoryOf } from '../../helpers/memory.js';
import { startCli } from '../../helpers/process.js';
import { TEST_SECRET } from '../../helpers/receiver.js';

// What an anonymous sender, and a page that misbehaves, can do to `listen --inspect`: each case named after
// the probe's finding in issue #32.

/** A GET with these headers; the status, and the body as text. */
function get(url: string, headers: Record<string, string> = {}): Promise<{ status: number; text: string }> {
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    const req = request({ host: u.hostname, port: u.port, path: u.pathname + u.search, headers }, (res) => {
      let text = '';
      res.setEncoding('utf8').on('data', (d: string) => (text += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
    });
    req.on('error', reject).end();
  });
}

/** Opens the page's event stream on a bare connection, reads up to its `ready` message, then stops reading (a frozen tab). */
function stalledStream(
  port: number,
  token: string,
): Promise<{ socket: Socket; read: (enough?: (text: string, bytes: number) => boolean) => Promise<{ bytes: number; text: string; ended: boolean }> }> {
  return new Promise((resolve, reject) => {
    let text = '';
    let bytes = 0;
    const utf8 = new StringDecoder('utf8');
    const socket = connect(port, '127.0.0.1', () => socket.write(`GET /api/events?token=${token} HTTP/1.1\r\nhost: 127.0.0.1:${port}\r\n\r\n`));
    socket.on('error', reject);
    const onData = (d: Buffer) => {
      bytes += d.length;
      text += utf8.write(d);
      if (!text.includes('event: ready')) return;
      socket.pause();
      socket.off('data', onData);
      resolve({
        socket,
        // reads again, to the end: resolves with what came, and whether listen ended the stream
        read: (enough?: (text: string, bytes: number) => boolean) =>
          new Promise((done) => {
            socket.on('data', (d: Buffer) => {
              bytes += d.length;
              text = (text + utf8.write(d)).slice(-100_000); // the end of it is what is looked at
              // the response's last chunk: listen ended the stream (the connection may stay open)
              if (text.endsWith('\r\n0\r\n\r\n')) done({ bytes, text, ended: true });
              else if (enough?.(text, bytes)) done({ bytes, text, ended: false });
            });
            socket.on('close', () => done({ bytes, text, ended: false }));
            socket.resume();
          }),
      });
    };
    socket.on('data', onData);
  });
}

describe('#32.5 a page that stops reading, and refused requests that claim long Trigger-Ids', () => {
  it('one stalled event stream and 10,000 unsigned requests with a 15 KB Trigger-Id: listen holds a bounded amount, and every claim is kept and shown cut (the stream, the record, its headers, the line)', async () => {
    const port = await freePort();
    const inspectPort = await freePort();
    const proc = startCli(['listen', '--port', String(port), '--secret-env', 'S', '--inspect', `127.0.0.1:${inspectPort}`], { S: TEST_SECRET });
    while (!/Inspector: \S+/.test(proc.stderr())) await new Promise((r) => proc.child.stderr.once('data', r));
    const token = new URL(/Inspector: (\S+)/.exec(proc.stderr())![1]!).searchParams.get('token')!;
    const agent = new Agent({ keepAlive: true, maxSockets: 16 });
    try {
      const stalled = await stalledStream(inspectPort, token);
      const before = memoryOf(proc.child.pid!).rss;
      const N = 10_000;
      let sent = 0;
      const claim = (n: number) => `trg_${'x'.repeat(15_000)}_${n}`;
      const one = () =>
        new Promise<number>((resolve) => {
          const req = request({ host: '127.0.0.1', port, method: 'POST', path: '/', agent, headers: { 'content-type': 'application/json', 'trigger-id': claim(sent++) } }, (res) => {
            res.resume();
            res.on('end', () => resolve(res.statusCode ?? 0));
          });
          req.on('error', () => resolve(0));
          req.end('{}');
        });
      const statuses = new Set<number>();
      while (sent < N) for (const s of await Promise.all(Array.from({ length: 16 }, one))) statuses.add(s);
      agent.destroy();
      const { peak } = memoryOf(proc.child.pid!);
      process.stdout.write(`stalled stream + ${sent} unsigned requests with a 15 KB Trigger-Id: RSS ${before.toFixed(0)} → peak ${peak.toFixed(0)} MiB\n`);
      expect([...statuses]).toEqual([400]);
      // sent: 150 MB of claims. Kept: the refused ring (100 rows), what the stalled stream holds (each
      // claim cut to 64 characters), and V8's own growth under load
      expect(peak - before).toBeLessThan(64);
      // what the stalled page gets, when it reads again: every row, its claim cut
      const got = await stalled.read((text) => text.includes(`data: [${N},`));
      const claims = [...got.text.matchAll(/^data: \[(\d+),.*$/gm)].map((m) => (JSON.parse(m[0].slice(6)) as unknown[])[6] as string);
      expect(claims.length).toBeGreaterThan(0);
      expect(claims.every((c) => c.length === CLAIM_KEPT + 1 && c.endsWith('…'))).toBe(true);
      // kept cut in the history, in the record and in its headers, as the page shows them
      const kept = JSON.parse((await get(`http://127.0.0.1:${inspectPort}/api/deliveries/${N}?token=${token}`)).text) as { record: { claimed_trigger_id: string; headers: Record<string, string> } };
      expect(kept.record.claimed_trigger_id).toBe(`${claim(N - 1).slice(0, CLAIM_KEPT)}…`);
      expect(kept.record.headers['trigger-id']).toBe(kept.record.claimed_trigger_id);
      stalled.socket.destroy();
      // and shown cut on listen's line
      await proc.stop();
      const lines = proc.lines.filter((l) => l.includes('claims '));
      expect(lines.length).toBe(N);
      expect(lines.every((l) => l.length < 400)).toBe(true);
    } finally {
      agent.destroy();
      await proc.stop();
    }
  }, 60_000);

  it('a stream that stops reading is sent at most 1 MiB more; once it reads again it is ended, and a reconnect from its Last-Event-ID fills in what it missed', async () => {
    const history = new History({ rows: 1000 });
    const inspector = await startInspector({ host: '127.0.0.1', port: 0, history, about: {} });
    try {
      const stalled = await stalledStream(inspector.port, inspector.token);
      // 100 MB of rows, in bursts, with turns of the event loop between them for the sockets to fill
      const N = 300_000;
      const pad = 'p'.repeat(250);
      for (let i = 1; i <= N; i++) {
        history.add({ time: '2026-11-24T00:00:00.000Z', outcome: 'accepted', status: 200, type: 'forecast_hour.available', trigger_id: `trg_${i}_${pad}`, subscription_id: '1', layout: 'standard' });
        if (i % 5000 === 0) await new Promise((r) => setImmediate(r));
      }
      // 1 MiB past what the sockets hold on both sides (loopback buffers grow to a few MiB), of 100 MB
      const got = await stalled.read((_, bytes) => bytes > 16 * 1024 * 1024);
      expect(got.bytes).toBeLessThan(16 * 1024 * 1024);
      expect(got.ended).toBe(true);
      const lastSeen = Number([...got.text.matchAll(/^id: (\d+)$/gm)].at(-1)![1]);
      expect(lastSeen).toBeLessThan(N);
      // the page reconnects from where it was: what it missed, as far as the history still keeps it, comes first
      const ready = await new Promise<string>((resolve) => {
        let text = '';
        const s = connect(inspector.port, '127.0.0.1', () => s.write(`GET /api/events?token=${inspector.token} HTTP/1.1\r\nhost: 127.0.0.1:${inspector.port}\r\nlast-event-id: ${lastSeen}\r\n\r\n`));
        s.setEncoding('utf8').on('data', (d: string) => {
          text += d;
          const m = /event: ready\ndata: (.*)\n\n/.exec(text);
          if (m) s.destroy(), resolve(m[1]!);
        });
      });
      const ids = (JSON.parse(ready) as { rows: unknown[][] }).rows.map((r) => r[0] as number);
      expect(ids).toEqual(Array.from({ length: 1000 }, (_, i) => N - 999 + i));
    } finally {
      await inspector.close();
    }
  }, 60_000);
});

describe('#32.5 in a real browser: a frozen tab', () => {
  it("a page frozen (Chromium's page lifecycle) while 30 MB of rows go by: listen ends its stream, and once the page runs again it reconnects and fills in, up to the newest", async () => {
    const history = new History({ rows: 500 });
    const inspector = await startInspector({ host: '127.0.0.1', port: 0, history, about: { keep: 500 } });
    const browser = await sharedBrowser();
    try {
      const page = await browser.newPage();
      let streams = 0;
      page.on('request', (r) => void (r.url().includes('/api/events') && streams++));
      await page.goto(inspector.url);
      await page.locator('.state.live').waitFor();
      const cdp = await page.context().newCDPSession(page);
      await cdp.send('Page.setWebLifecycleState', { state: 'frozen' });
      const N = 100_000;
      const pad = 'p'.repeat(250);
      for (let i = 1; i <= N; i++) {
        history.add({ time: '2026-11-24T00:00:00.000Z', outcome: 'accepted', status: 200, type: 'forecast_hour.available', trigger_id: `trg_${i}_${pad}`, subscription_id: '1', layout: 'standard' });
        if (i % 5000 === 0) await new Promise((r) => setImmediate(r));
      }
      await cdp.send('Page.setWebLifecycleState', { state: 'active' });
      await page
        .locator('.row', { hasText: `trg_${N}_` })
        .first()
        .waitFor();
      expect(streams).toBe(2); // its stream was ended, and the page opened another from where it was
      expect(await page.locator('#list').getAttribute('data-records')).toBe('500');
    } finally {
      await browser.close();
      await inspector.close();
    }
  }, 60_000);
});

describe('#32.16 a token of the right length in characters, not in bytes', () => {
  it('a non-ASCII token as long as the real one in characters: 401 for the page, 403 for the API (from the query or the header), never 500', async () => {
    const inspector = await startInspector({ host: '127.0.0.1', port: 0, history: new History(), about: {} });
    try {
      const base = `http://127.0.0.1:${inspector.port}`;
      const wrong = 'é'.repeat(inspector.token.length);
      expect(Buffer.byteLength(wrong)).not.toBe(Buffer.byteLength(inspector.token));
      const q = `?token=${encodeURIComponent(wrong)}`;
      const page = await get(`${base}/${q}`);
      expect(page.status).toBe(401);
      expect(page.text).toContain('Open the link');
      for (const path of ['/api/deliveries', '/api/events', '/api/runs', '/api/deliveries/1']) {
        const r = await get(`${base}${path}${q}`);
        expect(r.status, path).toBe(403);
        expect(r.text).not.toContain('byte length');
      }
      // in the header, as latin1 bytes
      const h = await get(`${base}/api/deliveries`, { 'x-wxhooks-token': Buffer.from(wrong).toString('latin1').slice(0, inspector.token.length) });
      expect(h.status).toBe(403);
      expect((await get(`${base}/api/deliveries?token=${inspector.token}`)).status).toBe(200);
    } finally {
      await inspector.close();
    }
  });
});
