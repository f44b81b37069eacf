import type { Dispatcher } from 'undici';
import type { ForwardResult } from '../delivery/report.js';
import { networkReason, readStart } from '../util/net.js';

export type { ForwardResult };

/** How much of the app's answer is kept for the inspector. */
const ANSWER_KEPT = 4096;

const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'upgrade', 'te', 'trailer', 'host', 'content-length', 'expect']);

/** Posts the exact bytes and original headers to the user's app; the app's own Host, the original in X-Forwarded-Host. */
export async function forwardDelivery(
  target: string,
  headers: Record<string, string | string[] | undefined>,
  body: Buffer,
  timeoutMs: number,
  dispatcher: Dispatcher,
  extraHeaders: Record<string, string> = {},
): Promise<ForwardResult> {
  const started = Date.now();
  const out: Record<string, string | string[]> = {};
  for (const [k, v] of Object.entries(headers)) if (v !== undefined && !HOP_BY_HOP.has(k.toLowerCase())) out[k] = v;
  if (headers.host) out['x-forwarded-host'] = String(headers.host);
  out['x-forwarded-proto'] = 'http';
  Object.assign(out, extraHeaders);
  try {
    // through the agent itself, so that undici is loaded only when there is somewhere to forward to
    const u = new URL(target);
    const res = await dispatcher.request({
      origin: u.origin,
      path: `${u.pathname}${u.search}`,
      method: 'POST',
      headers: out,
      body,
      signal: AbortSignal.timeout(timeoutMs),
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
    });
    const text = (await readStart(res.body, ANSWER_KEPT)).slice(0, ANSWER_KEPT);
    const ok = res.statusCode >= 200 && res.statusCode < 300;
    const headers: Record<string, string> = {};
    for (const [k, v] of Object.entries(res.headers)) if (v !== undefined) headers[k] = Array.isArray(v) ? v.join(', ') : v;
    return { ok, status: res.statusCode, body: text.replace(/\s+/g, ' ').trim().slice(0, 200), answer: { headers, body: text }, ms: Date.now() - started };
  } catch (err) {
    const reason = networkReason(err, timeoutMs);
    return { ok: false, error: reason === 'connection refused' ? 'connection refused (is your app running?)' : reason, ms: Date.now() - started };
  }
}
