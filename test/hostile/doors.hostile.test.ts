import { createServer, type Server } from 'node:http';
import { connect, type AddressInfo, type Socket } from 'node:net';
import { describe, expect, it } from 'vitest';
import { Webhooks, createNodeMiddleware } from '../../src/index.js';
import { Webhooks as WebWebhooks, createWebHandler } from '../../src/handler/web.js';
import { signDelivery } from '../../src/signing/index.js';
import { post } from '../helpers/http.js';
import { signed, startTestReceiver, TEST_SECRET } from '../helpers/receiver.js';

// What an anonymous sender can make each door hold (#32.4, #32.7): bodies in flight bounded together, a
// declared length never set aside, a request that cannot be a delivery refused before its body is read,
// and a stalled connection's share given back when it is cut off, whatever the client does.

const MiB = 1024 * 1024;

async function serve(server: Server): Promise<number> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return (server.address() as AddressInfo).port;
}
const close = (server: Server) => new Promise<void>((resolve) => (server.closeAllConnections(), server.close(() => resolve())));

/** A connection that sends a request's head, then what it is told to, and never reads nor closes its side (a client that stalls). */
function stalled(port: number, head: string): Promise<Socket> {
  return new Promise((resolve) => {
    const socket = connect({ port, host: '127.0.0.1', allowHalfOpen: true }, () => {
      socket.setNoDelay(true);
      socket.write(head);
      socket.pause();
      resolve(socket);
    });
    socket.on('error', () => undefined);
  });
}

/** Headers that pass every check but the signature: what an attacker can always send. */
function plausible(): Record<string, string> {
  return { 'trigger-id': 'trg_junk', 'webhook-timestamp': String(Math.floor(Date.now() / 1000)), 'webhook-signature': `v1,${Buffer.alloc(32, 1).toString('base64')}` };
}

/** A request's head with plausible headers: a door reads its body. */
const headOf = (path: string, length: number) =>
  `POST ${path} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: ${length}\r\n${Object.entries(plausible())
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join('')}\r\n`;

describe('wxhooks/web (#32.4)', () => {
  it('a request without the three headers, or with a stale timestamp, is answered before a byte of its body is read', async () => {
    const handler = createWebHandler(new WebWebhooks({ secret: TEST_SECRET }));
    for (const [headers, status] of [
      [{}, 400],
      [{ ...plausible(), 'webhook-timestamp': '1700000000' }, 401],
      [{ 'trigger-id': 'trg_x', 'webhook-timestamp': String(Math.floor(Date.now() / 1000)) }, 401],
    ] as const) {
      let pulled = 0;
      let readMuch!: (why: string) => void;
      const read = new Promise<string>((resolve) => (readMuch = resolve));
      const body = new ReadableStream<Uint8Array>(
        {
          pull(controller) {
            if (++pulled >= 8) readMuch('read 8 MiB of it');
            controller.enqueue(new Uint8Array(MiB));
          },
        },
        { highWaterMark: 0 },
      );
      const answered = await Promise.race([handler(new Request('http://app.example/', { method: 'POST', headers, body, duplex: 'half' } as RequestInit)), read]);
      expect(answered).toBeInstanceOf(Response);
      expect((answered as Response).status).toBe(status);
      expect(pulled).toBeLessThanOrEqual(1);
    }
  });

  it('bodies in flight are bounded together by maxInflight: 20 stalled 4 MiB uploads against 8 MiB hold two, the rest told 503 with Retry-After', async () => {
    const handler = createWebHandler(new WebWebhooks({ secret: TEST_SECRET }), { maxInflight: 8 * MiB });
    let stalledBodies = 0;
    const statuses: number[] = [];
    const ends: (() => void)[] = [];
    const answers = Array.from({ length: 20 }, () => {
      let sent = 0;
      const body = new ReadableStream<Uint8Array>(
        {
          pull(controller) {
            if (sent++ < 4) return controller.enqueue(new Uint8Array(MiB).fill(0x61));
            stalledBodies++;
            return new Promise<void>((resolve) => ends.push(() => (controller.close(), resolve())));
          },
        },
        { highWaterMark: 0 },
      );
      return handler(new Request('http://app.example/', { method: 'POST', headers: plausible(), body, duplex: 'half' } as RequestInit)).then(async (r) => {
        statuses.push(r.status);
        if (r.status === 503) expect(r.headers.get('retry-after')).toBe('5');
        return r;
      });
    });
    // every upload is either held (its sender stalled) or answered
    await expect.poll(() => stalledBodies + statuses.length, { timeout: 20_000 }).toBe(20);
    expect(stalledBodies).toBeLessThanOrEqual(2);
    expect(statuses.filter((s) => s === 503).length).toBeGreaterThanOrEqual(18);
    ends.forEach((end) => end());
    await Promise.all(answers);
  });
});

describe('a declared length is never set aside (#32.7)', () => {
  it('the Node middleware: 11 connections declaring 3 MiB and sending two bytes each do not lock a 4 MiB budget; a 1.5 MiB delivery still gets in', async () => {
    const webhooks = new Webhooks({ secret: TEST_SECRET });
    const server = createServer(createNodeMiddleware(webhooks, { path: '/', maxInflight: 4 * MiB }));
    // the test sees each chunk arrive at the server, so each byte is sent on its own
    let chunks = 0;
    server.on('request', (req) => req.on('data', () => chunks++));
    const port = await serve(server);
    const sockets: Socket[] = [];
    try {
      for (let i = 0; i < 11; i++) {
        const s = await stalled(port, headOf('/', 3 * MiB));
        sockets.push(s);
        for (const _ of [1, 2]) {
          const before = chunks;
          s.write('{');
          await expect.poll(() => chunks).toBe(before + 1);
        }
      }
      const d = signed('trg_after_tricklers', { data: { model: 'wm-6', forecast_hour: 0, pad: 'x'.repeat(1.5 * MiB) } });
      expect((await post(`http://127.0.0.1:${port}/`, d.headers, d.body)).status).toBe(200);
    } finally {
      sockets.forEach((s) => s.destroy());
      await close(server);
    }
  });

  it('listen: 11 connections declaring 3 MiB and trickling bytes do not lock --max-inflight 4MiB; a 1.5 MiB delivery still gets in', async () => {
    const r = await startTestReceiver({ maxInflight: 4 * MiB });
    const sockets: Socket[] = [];
    try {
      for (let i = 0; i < 11; i++) sockets.push(await stalled(r.port, headOf('/', 3 * MiB)));
      for (let byte = 0; byte < 3; byte++) {
        for (const s of sockets) s.write('{');
        await new Promise((resolve) => setTimeout(resolve, 50)); // each byte a chunk of its own (a delivery of no concern if two arrive as one)
      }
      const d = signed('trg_after_tricklers', { data: { model: 'wm-6', forecast_hour: 0, pad: 'x'.repeat(1.5 * MiB) } });
      expect((await post(r.url, d.headers, d.body)).status).toBe(200);
    } finally {
      sockets.forEach((s) => s.destroy());
      await r.close();
    }
  });
});

describe("a stalled connection's share is given back when it is cut off, whatever the client does (#32.7)", () => {
  it('listen: the 408 after 6 × --read-timeout closes the connection of a client that never reads, and its bytes in flight are free again', async () => {
    // (headers within 0.5 s: less is a race with a busy machine's event loop, which may not read them in time)
    const r = await startTestReceiver({ readTimeoutMs: 500, maxInflight: MiB });
    let s: Socket | undefined;
    try {
      s = await stalled(r.port, headOf('/', 900 * 1024));
      s.write(Buffer.alloc(800 * 1024, 0x61));
      // reported once its connection is gone (not only half-closed)
      expect(await r.waitFor((e) => e.outcome === 'timed_out')).toMatchObject({ status: 408 });
      const d = signed('trg_after_stall', { data: { model: 'wm-6', forecast_hour: 0, pad: 'x'.repeat(800 * 1024) } });
      expect((await post(r.url, d.headers, d.body)).status).toBe(200);
    } finally {
      s?.destroy();
      await r.close();
    }
  }, 20_000);

  it("the Node middleware: a body not in whole within bodyTimeoutMs is answered 408 and its connection closed, not held for Node's 300 s; its share is free again", async () => {
    const webhooks = new Webhooks({ secret: TEST_SECRET });
    const server = createServer(createNodeMiddleware(webhooks, { path: '/', maxInflight: MiB, bodyTimeoutMs: 300 }));
    const closed = new Promise<void>((resolve) => server.once('connection', (socket: Socket) => socket.once('close', () => resolve())));
    const port = await serve(server);
    let s: Socket | undefined;
    try {
      s = await stalled(port, headOf('/', 900 * 1024));
      s.write(Buffer.alloc(800 * 1024, 0x61));
      await closed;
      const body = JSON.stringify({ type: 'forecast_hour.available', subscription_id: '1', trigger_id: 'trg_mw_after_stall', data: { model: 'wm-6', pad: 'x'.repeat(800 * 1024) } });
      const headers = signDelivery({ secret: TEST_SECRET, body, triggerId: 'trg_mw_after_stall' }) as unknown as Record<string, string>;
      expect((await post(`http://127.0.0.1:${port}/`, headers, body)).status).toBe(200);
    } finally {
      s?.destroy();
      await close(server);
    }
  }, 20_000);
});
