import { connect, type Socket } from 'node:net';
import { signDelivery } from '../../src/signing/index.js';

// What the hostile cases against `listen` of both tiers share (test/hostile/listen.hostile.test.ts, in
// this process; test/full/hostile/listen.hostile.test.ts, the built binary): the secret, a delivery's body
// and its signature, and connections that stall or send raw bytes.

export const SECRET = 'whsec_' + Buffer.alloc(32, 9).toString('base64');
let seq = 0;

export function body(extra: Record<string, unknown> = {}): Buffer {
  seq++;
  return Buffer.from(JSON.stringify({ type: 'forecast_hour.available', webhook_id: '1', subscription_id: '1', trigger_id: `trg_hostile_${process.pid}_${seq}`, data: { model: 'wm-6' }, ...extra }));
}
/** The counter `body` numbers its trigger ids with, for a body a test writes itself: its value, then one more. */
export const nextSeq = (): number => seq++;

export const signed = (b: Buffer, layout: 'standard' | 'stripe' | 'hex-timestamp' = 'standard', triggerId?: string) =>
  signDelivery({ secret: SECRET, body: b, triggerId: triggerId ?? (JSON.parse(b.toString()) as { trigger_id?: string }).trigger_id ?? 'trg_x', layout }) as Record<string, string>;

/** Opens a connection and writes `head` (and, if given, the first `bytes` of a body), then leaves it open. */
export function stall(port: number, head: string, bytes = 0): Promise<Socket> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1', () => {
      socket.write(head);
      if (bytes) socket.write(Buffer.alloc(bytes, 0x61));
      resolve(socket);
    });
    socket.on('error', () => undefined);
  });
}

/** Sends raw bytes and collects everything the server answers until it closes or `ms` pass. */
export function raw(port: number, data: string | Buffer, ms = 3000): Promise<string> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1', () => socket.write(data));
    let answer = '';
    socket.setEncoding('latin1').on('data', (d: string) => (answer += d));
    const done = () => resolve(answer);
    socket.on('close', done);
    socket.on('error', done);
    setTimeout(() => {
      socket.destroy();
      done();
    }, ms);
  });
}
