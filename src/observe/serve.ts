import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import * as DEFAULTS from '../delivery/defaults.js';
import { listenOn } from '../util/net.js';
import { redact } from '../util/redact.js';
import { exposition } from './prometheus.js';
import type { Series } from './series.js';

/**
 * A long-running door's own port (`--metrics ADDR`, a consumer's `metrics` option), never the public
 * receiver's: `GET /healthz` (alive: 200), `GET /readyz` (200 only while every check passes; 503 with a
 * JSON body naming what is not ready), `GET /metrics` (Prometheus' text format). Nothing else, and no
 * delivery, secret or body in any of it.
 */

/** One thing a door needs to take deliveries (its store, a broker, the relay link): undefined when it is fine, else why not. */
export interface ReadyCheck {
  name: string;
  check(): string | undefined | Promise<string | undefined>;
}

export interface ObserveServerOptions {
  host: string;
  port: number;
  /** `wxhooks_info`'s door: listen, relay, consumer. */
  door: string;
  version: string;
  series: () => Series[];
  /** What `/readyz` asks, each within DEFAULTS.readyCheckMs (asked when it is asked: a probe, not a cache). */
  checks: () => ReadyCheck[];
}

export interface RunningObserveServer {
  /** `http://host:port` (no path). */
  url: string;
  port: number;
  close(): Promise<void>;
}

/** Each check's answer: `ok`, or why not (redacted: a reason quotes what a store or broker said). */
export async function readiness(checks: ReadyCheck[], timeoutMs: number = DEFAULTS.readyCheckMs): Promise<{ ready: boolean; checks: Record<string, string> }> {
  const answers = await Promise.all(
    checks.map(async (c) => {
      let timer: ReturnType<typeof setTimeout> | undefined;
      const late = new Promise<string>((resolve) => (timer = setTimeout(() => resolve(`did not answer within ${timeoutMs} ms`), timeoutMs)));
      try {
        const why = await Promise.race([Promise.resolve().then(() => c.check()), late]);
        return [c.name, why === undefined ? 'ok' : redact(why)] as const;
      } catch (err) {
        return [c.name, redact(err instanceof Error ? err.message : String(err))] as const;
      } finally {
        clearTimeout(timer);
      }
    }),
  );
  return { ready: answers.every(([, a]) => a === 'ok'), checks: Object.fromEntries(answers) };
}

export async function startObserveServer(o: ObserveServerOptions): Promise<RunningObserveServer> {
  const metrics = await exposition(o.door, o.version, o.series);
  const json = (res: ServerResponse, status: number, body: unknown) => {
    const text = `${JSON.stringify(body)}\n`;
    res.writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store', 'content-length': Buffer.byteLength(text) });
    res.end(text);
  };
  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = (req.url ?? '/').split('?')[0];
    if (path !== '/healthz' && path !== '/readyz' && path !== '/metrics') return json(res, 404, { error: 'not found: /healthz, /readyz and /metrics are served here' });
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.setHeader('allow', 'GET, HEAD');
      return json(res, 405, { error: 'only GET' });
    }
    if (path === '/healthz') return json(res, 200, { ok: true });
    if (path === '/readyz') {
      const r = await readiness(o.checks());
      return json(res, r.ready ? 200 : 503, r.ready ? r : { ...r, not_ready: Object.entries(r.checks).flatMap(([name, a]) => (a === 'ok' ? [] : [`${name}: ${a}`])) });
    }
    const text = await metrics.text();
    res.writeHead(200, { 'content-type': metrics.contentType, 'cache-control': 'no-store', 'content-length': Buffer.byteLength(text) });
    res.end(text);
  }
  const server = createServer((req, res) => {
    req.resume();
    handle(req, res).catch((err: Error) => {
      if (!res.headersSent) json(res, 500, { error: redact(err.message) });
    });
  });
  server.keepAliveTimeout = DEFAULTS.keepAliveMs;
  const { port, url } = await listenOn(server, o.host, o.port);
  return {
    url: url.replace(/\/$/, ''),
    port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
