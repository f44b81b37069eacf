import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Dispatcher } from 'undici';
import type { Verifier, VerifyFailure } from '../signing/verify.js';
import type { LayoutName } from '../signing/layouts.js';
import { forwardDelivery, type ForwardResult } from './forward.js';
import type { ProcessedPairs } from './pairs.js';
import { isoMillis } from '../util/clock.js';
import { saveDelivery, toSaved } from './saved.js';

export type Outcome =
  | 'listening'
  | 'accepted'
  | 'duplicate'
  | 'in_progress'
  | 'forward_failed'
  | 'refused_by_flag'
  | 'unverified'
  | 'bad_request'
  | 'too_large'
  | 'method_not_allowed'
  | 'not_found'
  | 'error';

/** One line of `listen`'s report: what arrived and what was answered. */
export interface ReceiverEvent {
  time: string;
  outcome: Outcome;
  status: number;
  method?: string;
  path?: string;
  size?: number;
  type?: string;
  webhook_id?: string;
  subscription_id?: string;
  trigger_id?: string;
  model?: string;
  initialization_time?: string;
  forecast_hour?: number;
  test?: boolean;
  layout?: LayoutName;
  /** Set on the first match in auto mode: the layout is now pinned. */
  pinned?: boolean;
  warning?: string;
  forward?: ForwardResult;
  saved_to?: string;
  reason?: string;
  message?: string;
  hint?: string;
  skew_seconds?: number;
}

export interface ReceiverOptions {
  port: number;
  host: string;
  path: string;
  verifier: Verifier;
  pairs: ProcessedPairs;
  maxBody: number;
  forwardTo?: string;
  forwardTimeoutMs: number;
  saveDir?: string;
  respondStatus?: number;
  /** Headers must arrive within this, and the whole request within six times it (slow-client guard). */
  readTimeoutMs: number;
  onEvent: (event: ReceiverEvent) => void;
}

export interface RunningReceiver {
  url: string;
  port: number;
  close(): Promise<void>;
}

/** What each verification failure is answered with: 400 for what is not a delivery, 401 for what is not authentic. */
export function statusForFailure(f: VerifyFailure): number {
  if (f.reason === 'not_json_object') return 400;
  if (f.reason === 'missing_header') return f.header === 'Webhook-Signature' ? 401 : 400;
  return 401;
}

type BodyResult = { body: Buffer } | { tooLarge: number } | { aborted: true };

/**
 * Reads the body into one buffer (pre-sized from Content-Length), stopping at the limit. A callback, not
 * a promise: the answer is then written in the same turn as the last chunk arrives (measured: the
 * promise's extra turn cost the response write its batching with the request's own I/O).
 */
function readBody(req: IncomingMessage, max: number, resolve: (r: BodyResult) => void): void {
  const declared = Number(req.headers['content-length']);
  if (Number.isFinite(declared) && declared > max) {
    resolve({ tooLarge: declared });
    return;
  }
  const expected = Number.isFinite(declared) && declared >= 0 ? declared : -1;
  // The usual small delivery arrives as one chunk of the declared size, and is kept as it is;
  // otherwise the chunks are copied into one buffer of the declared size, or gathered.
  let whole: Buffer | undefined;
  let buf: Buffer | undefined;
  const chunks: Buffer[] = [];
  let size = 0;
  let done = false;
  const finish = (r: BodyResult) => {
    if (done) return;
    done = true;
    resolve(r);
  };
  req.on('data', (chunk: Buffer) => {
    if (done) return;
    if (size + chunk.length > max) {
      req.pause();
      finish({ tooLarge: size + chunk.length });
      return;
    }
    if (size === 0 && chunk.length === expected) whole = chunk;
    else {
      if (whole) {
        // more than was declared: gather from here on
        chunks.push(whole);
        whole = undefined;
      } else if (size === 0 && expected > chunk.length) buf = Buffer.allocUnsafe(expected);
      if (buf && size + chunk.length <= buf.length) chunk.copy(buf, size);
      else {
        if (buf) {
          chunks.push(buf.subarray(0, size));
          buf = undefined;
        }
        chunks.push(chunk);
      }
    }
    size += chunk.length;
  });
  req.on('end', () => finish({ body: whole ?? (buf ? buf.subarray(0, size) : Buffer.concat(chunks, size)) }));
  // 'close' after 'end' finds it finished; before it, the client went away. (No 'error' listener:
  // Node emits a request's errors only to listeners, and 'close' follows them.)
  req.on('close', () => finish({ aborted: true }));
}

const OK_BODY = '{"ok":true}';
/** Node reads the headers given to writeHead without changing them, so the common answer's can be made once. */
const OK_HEADERS = { 'content-type': 'application/json', 'content-length': OK_BODY.length };
const DUPLICATE_BODY = '{"ok":true,"duplicate":true}';
const str = (v: unknown) => (typeof v === 'string' || typeof v === 'number' ? String(v) : undefined);

/**
 * The local receiver: reads each delivery's raw bytes, verifies it, skips
 * pairs already processed, saves and forwards it, and reports every request.
 */
export async function startReceiver(o: ReceiverOptions): Promise<RunningReceiver> {
  const inFlight = new Set<string>();
  // undici is loaded only when there is somewhere to forward to
  const agent: Dispatcher | undefined = o.forwardTo
    ? new (await import('undici')).Agent({ keepAliveTimeout: 10_000, connections: 64 })
    : undefined;

  const answer = (res: ServerResponse, status: number, body: Record<string, unknown> | string, close = false) => {
    if (res.headersSent) return;
    if (body === OK_BODY) {
      res.writeHead(status, OK_HEADERS);
      res.end(OK_BODY);
      return;
    }
    const text = typeof body === 'string' ? body : JSON.stringify(body);
    const headers: Record<string, string | number> = { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) };
    if (close) headers.connection = 'close';
    res.writeHead(status, headers);
    res.end(text);
  };

  const failed = (res: ServerResponse, err: Error) => {
    answer(res, 500, { error: 'internal error in wxhooks listen' });
    o.onEvent({ time: isoMillis(Date.now()), outcome: 'error', status: 500, message: err.message });
  };
  /** Reports what was answered: at once, or when saving and forwarding are done. */
  const report = (res: ServerResponse, event: ReceiverEvent | Promise<ReceiverEvent>) => {
    if (event instanceof Promise) event.then(o.onEvent, (err: Error) => failed(res, err));
    else o.onEvent(event);
  };

  /** Answers one request, and reports it. */
  function handle(req: IncomingMessage, res: ServerResponse): void {
    const now = Date.now();
    const url = req.url ?? '/';
    const query = url.indexOf('?');
    const path = query === -1 ? url : url.slice(0, query);
    if (path !== o.path) {
      answer(res, 404, { error: 'not found', hint: `deliveries go to ${o.path}` });
      req.resume();
      return report(res, { time: isoMillis(now), outcome: 'not_found', status: 404, method: req.method, path });
    }
    if (req.method !== 'POST') {
      res.setHeader('allow', 'POST');
      answer(res, 405, { error: 'only POST is accepted here' });
      req.resume();
      return report(res, { time: isoMillis(now), outcome: 'method_not_allowed', status: 405, method: req.method, path });
    }
    readBody(req, o.maxBody, (read) => {
      let event: ReceiverEvent | Promise<ReceiverEvent>;
      try {
        event = afterBody(req, res, now, path, read);
      } catch (err) {
        event = Promise.reject(err);
      }
      report(res, event);
    });
  }

  function afterBody(req: IncomingMessage, res: ServerResponse, now: number, path: string, read: BodyResult): ReceiverEvent | Promise<ReceiverEvent> {
    const time = isoMillis(now);
    if ('aborted' in read) {
      return { time, outcome: 'bad_request', status: 408, method: 'POST', path, message: 'the body did not arrive in time, or the client went away (--read-timeout)' };
    }
    if ('tooLarge' in read) {
      answer(res, 413, { error: `body over ${o.maxBody} bytes` }, true);
      req.destroy();
      return { time, outcome: 'too_large', status: 413, method: 'POST', path, size: read.tooLarge, message: `${read.tooLarge} bytes or more; --max-body is ${o.maxBody}` };
    }
    const body = read.body;
    const result = o.verifier.verify(req.headers, body, now);
    if (!result.ok) {
      const status = statusForFailure(result);
      answer(res, status, { error: result.message });
      return {
        time,
        outcome: status === 400 ? 'bad_request' : 'unverified',
        status,
        method: 'POST',
        path,
        size: body.length,
        reason: result.reason,
        message: result.message,
        hint: result.hint,
        skew_seconds: result.skewSeconds,
        trigger_id: str(req.headers['trigger-id']),
      };
    }
    const p = result.payload;
    const data = (typeof p.data === 'object' && p.data !== null ? p.data : {}) as Record<string, unknown>;
    const subscription = str(p.subscription_id) ?? str((p.subscription as Record<string, unknown> | undefined)?.id) ?? '';
    const trigger = str(p.trigger_id) ?? result.triggerId;
    const ev: ReceiverEvent = {
      time,
      outcome: 'accepted',
      status: 200,
      method: 'POST',
      path,
      size: body.length,
      type: str(p.type),
      webhook_id: str(p.webhook_id),
      subscription_id: subscription || undefined,
      trigger_id: trigger,
      model: str(data.model),
      initialization_time: str(data.initialization_time),
      forecast_hour: typeof data.forecast_hour === 'number' ? data.forecast_hour : undefined,
      layout: result.layout,
    };
    // the rarely set ones only when set: every property, even an undefined one, costs JSON.stringify time
    if (p.test === true) ev.test = true;
    if (result.pinnedNow) ev.pinned = true;
    if (result.warning) ev.warning = result.warning;
    if (o.pairs.has(trigger, subscription, now)) {
      answer(res, 200, DUPLICATE_BODY);
      ev.outcome = 'duplicate';
      return ev;
    }
    if (!o.saveDir && !o.forwardTo) {
      // the common case, answered in this turn: nothing is ever in flight without saving or forwarding
      return finishAccepted(res, ev, 200, trigger, subscription);
    }
    const key = `${trigger}\u0000${subscription}`;
    if (inFlight.has(key)) {
      answer(res, 409, { error: 'this notification is being processed; try again later' });
      ev.outcome = 'in_progress';
      ev.status = 409;
      return ev;
    }
    inFlight.add(key);
    return handleSlow(req, res, ev, now, body, trigger, subscription, key);
  }

  function finishAccepted(res: ServerResponse, ev: ReceiverEvent, appStatus: number, trigger: string, subscription: string): ReceiverEvent {
    const status = o.respondStatus ?? appStatus;
    const ok = status >= 200 && status < 300;
    // Only a delivery acknowledged with a 2xx counts as processed; otherwise the service's retry must get through.
    if (ok) o.pairs.add(trigger, subscription);
    answer(res, status, ok ? OK_BODY : { error: `answered ${status} (--respond-status)` });
    ev.outcome = ok ? 'accepted' : 'refused_by_flag';
    ev.status = status;
    return ev;
  }

  async function handleSlow(req: IncomingMessage, res: ServerResponse, ev: ReceiverEvent, now: number, body: Buffer, trigger: string, subscription: string, key: string): Promise<ReceiverEvent> {
    try {
      if (o.saveDir) {
        ev.saved_to = await saveDelivery(o.saveDir, toSaved(new Date(now), req.method ?? 'POST', req.url ?? '/', req.headers, body), `${trigger}-${subscription}`);
      }
      let status = 200;
      if (o.forwardTo && agent) {
        ev.forward = await forwardDelivery(o.forwardTo, req.headers, body, o.forwardTimeoutMs, agent);
        if (!ev.forward.ok) {
          answer(res, 502, { error: `forwarding failed: ${ev.forward.error ?? `your app answered ${ev.forward.status}`}` });
          ev.outcome = 'forward_failed';
          ev.status = 502;
          return ev;
        }
        status = ev.forward.status!;
      }
      return finishAccepted(res, ev, status, trigger, subscription);
    } finally {
      inFlight.delete(key);
    }
  }

  // Slow clients: headers within the read timeout, the whole request within six times it. (Node checks
  // these on its own connection list; a per-socket idle timer would cost every request a timer refresh.)
  const server: Server = createServer(
    { connectionsCheckingInterval: Math.min(1000, o.readTimeoutMs), headersTimeout: o.readTimeoutMs, requestTimeout: o.readTimeoutMs * 6 },
    (req, res) => {
      try {
        handle(req, res);
      } catch (err) {
        failed(res, err as Error);
      }
    },
  );
  server.keepAliveTimeout = 5_000;
  server.on('clientError', (err: NodeJS.ErrnoException, socket) => {
    const timedOut = err.code === 'ERR_HTTP_REQUEST_TIMEOUT' || err.code === 'ERR_HTTP_HEADERS_TIMEOUT';
    if (socket.writable) socket.end(`HTTP/1.1 ${timedOut ? '408 Request Timeout' : '400 Bad Request'}\r\nconnection: close\r\n\r\n`);
    else socket.destroy();
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(o.port, o.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;
  const host = o.host.includes(':') ? `[${o.host}]` : o.host === '0.0.0.0' ? '127.0.0.1' : o.host;
  return {
    url: `http://${host}:${port}${o.path}`,
    port,
    async close() {
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeIdleConnections();
        setTimeout(() => server.closeAllConnections(), 2000).unref();
      });
      await agent?.close().catch(() => undefined);
      o.pairs.close();
    },
  };
}
