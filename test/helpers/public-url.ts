import { request } from 'node:http';
import { verifyDelivery } from '../../src/signing/index.js';
import { TEST_SECRET } from './receiver.js';
import { sendJson, startServer, type TestServer } from './server.js';

// What the `listen --public-url` hostile cases of both tiers share (test/hostile/public-url.hostile.test.ts,
// test/full/hostile/public-url.hostile.test.ts): the app behind listen, the attacker's forged request, a GET.

/** An app that records what it is forwarded, and checks each delivery's signature as a real app would. */
export async function checkingApp(): Promise<TestServer & { got: { trigger: string; model?: string; verified: boolean }[] }> {
  const got: { trigger: string; model?: string; verified: boolean }[] = [];
  const app = await startServer((req, res) => {
    const v = verifyDelivery({ secret: TEST_SECRET, headers: req.headers, body: req.body });
    const body = req.json as { trigger_id: string; data?: { model?: string } };
    got.push({ trigger: body.trigger_id, model: body.data?.model, verified: v.ok });
    sendJson(res, v.ok ? 200 : 401, { ok: v.ok });
  });
  return Object.assign(app, { got });
}

/** A forged request: a real delivery's Trigger-Id, the attacker's body, a signature that is not one. */
export function forged(trigger: string): { headers: Record<string, string>; body: Buffer } {
  const body = Buffer.from(JSON.stringify({ type: 'forecast_hour.available', subscription_id: '1', trigger_id: trigger, data: { model: 'EVIL' } }));
  return {
    body,
    headers: {
      'content-type': 'application/json',
      'trigger-id': trigger,
      'webhook-timestamp': String(Math.floor(Date.now() / 1000)),
      'webhook-signature': `v1,${Buffer.alloc(32, 3).toString('base64')}`,
    },
  };
}

export function fetchJson(url: string, init: { method?: string; headers?: Record<string, string> } = {}): Promise<{ status: number; body: Record<string, unknown> }> {
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    const req = request({ host: u.hostname, port: u.port, path: u.pathname + u.search, method: init.method ?? 'GET', headers: init.headers }, (res) => {
      let text = '';
      res.setEncoding('utf8').on('data', (d: string) => (text += d));
      res.on('end', () => {
        let body: Record<string, unknown> = {};
        try {
          body = JSON.parse(text) as Record<string, unknown>;
        } catch {
          body = { text };
        }
        resolve({ status: res.statusCode ?? 0, body });
      });
    });
    req.on('error', reject).end();
  });
}
