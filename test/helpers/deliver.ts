import { request, type Agent } from 'node:http';
import { signDelivery } from '../../src/signing/index.js';

/**
 * POSTs a delivery as the service would, signed now, on the given connection pool; resolves with the
 * status, or 0 when the connection failed (a killed receiver). The body is a forecast_hour.available
 * for `trigger`, with `data` as given.
 */
export function deliverSigned(url: string, agent: Agent, secret: string, trigger: string, data: Record<string, unknown> = { model: 'wm-6', forecast_hour: 0 }): Promise<number> {
  const body = Buffer.from(JSON.stringify({ type: 'forecast_hour.available', webhook_id: '1', subscription_id: '1', trigger_id: trigger, data }));
  const headers = { 'content-type': 'application/json', ...signDelivery({ secret, body, triggerId: trigger }) };
  const u = new URL(url);
  return new Promise((resolve) => {
    const req = request({ host: u.hostname, port: u.port, path: u.pathname, method: 'POST', headers, agent }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
      res.on('error', () => resolve(0));
    });
    req.on('error', () => resolve(0));
    req.end(body);
  });
}
