import { randomBytes, timingSafeEqual } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { LineBuffer } from '../util/line-buffer.js';
import { listenOn, shownHost } from '../util/net.js';
import type { HistorySource } from './history.js';
import { fromRow, listedRow } from './listed.js';

/**
 * The inspector page's server: a handful of routes behind two checks. Every request's Host must be the
 * address it is bound to or `localhost` (a DNS-rebinding page gets nothing); every `/api/` request must
 * carry the session's token, which only the page itself is given; a replay must also come from the
 * page's own origin. The webhook's secret never leaves `listen`.
 */
export interface InspectorOptions {
  host: string;
  port: number;
  history: HistorySource;
  /** Re-sends delivery `id` to the app; undefined when there is nowhere to send it (no --forward-to). */
  replay?: (id: number) => Promise<{ status: number; body: unknown }>;
  /** What the page says of this listen (its URL, the app it forwards to). */
  about: Record<string, unknown>;
}

export interface RunningInspector {
  url: string;
  port: number;
  /** The session's token (the page carries it); tests use it. */
  token: string;
  close(): Promise<void>;
}

/** How often the page's stream gets what happened since (events are batched, so a busy listen sends a message, not a thousand). */
const BATCH_MS = 100;
const KEEP_ALIVE_MS = 15_000;

/** The built page: dist/inspector/ beside dist/bin/ (the bundle) and dist/receiver/ (tsc); from src/ in the tests. */
function assets(): { js: string; css: string } {
  for (const dir of ['../inspector/', '../../dist/inspector/']) {
    const js = new URL(`${dir}app.js`, import.meta.url);
    if (existsSync(js)) return { js: readFileSync(js, 'utf8'), css: readFileSync(new URL(`${dir}app.css`, import.meta.url), 'utf8') };
  }
  throw new Error('the inspector page is not built: run `npm run build`');
}

function page(token: string, about: Record<string, unknown>): string {
  const config = JSON.stringify({ token, ...about }).replace(/</g, '\\u003c');
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>wxhooks inspector</title><link rel="stylesheet" href="/app.css"></head>
<body><script id="config" type="application/json">${config}</script><div id="app"></div><script src="/app.js"></script></body></html>`;
}

const same = (a: string, b: string) => a.length === b.length && timingSafeEqual(Buffer.from(a), Buffer.from(b));

export async function startInspector(o: InspectorOptions): Promise<RunningInspector> {
  const token = randomBytes(24).toString('base64url');
  const { js, css } = assets();
  const streams = new Set<ServerResponse>();
  let allowedHosts: Set<string>;

  // The stream's messages: one `data:` line per record (a row, src/receiver/listed.ts), written into a
  // buffer as each record comes, then the id of the last one. Records kept in an array until the batch
  // was sent (100 ms) outlived V8's young generation, every one of them: measured with perf at 50
  // clients, V8's marking took 1.5% of `listen --inspect`'s CPU so, 0.0-0.4% with each row written as
  // its record comes, and sweeping 0.56% against 0.28% (BENCHMARKS.md).
  let lastRow = 0;
  const rows = new LineBuffer((chunk) => {
    const end = Buffer.from(`id: ${lastRow}\nevent: deliveries\n\n`);
    for (const res of streams) {
      res.write(chunk);
      res.write(end);
    }
  }, BATCH_MS);
  const unsubscribe = o.history.subscribe((record) => {
    if (!streams.size) return;
    rows.push(`data: ${JSON.stringify(listedRow(record))}`);
    lastRow = record.id;
  });
  const keepAlive = setInterval(() => {
    for (const res of streams) res.write(': keep-alive\n\n');
  }, KEEP_ALIVE_MS).unref();

  const json = (res: ServerResponse, status: number, body: unknown) => {
    const text = JSON.stringify(body);
    res.writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store', 'content-length': Buffer.byteLength(text) });
    res.end(text);
  };
  const refuse = (res: ServerResponse, status: number, error: string) => json(res, status, { error });

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    res.setHeader('x-content-type-options', 'nosniff');
    res.setHeader('referrer-policy', 'no-referrer');
    if (!allowedHosts.has((req.headers.host ?? '').toLowerCase())) return refuse(res, 421, 'this inspector answers only at its own address');
    const u = new URL(req.url ?? '/', 'http://inspector');
    const path = u.pathname;
    if (req.method === 'GET' && path === '/') {
      res.writeHead(200, { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store', 'content-security-policy': "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; frame-ancestors 'none'" });
      res.end(page(token, o.about));
      return;
    }
    if (req.method === 'GET' && path === '/app.js') {
      res.writeHead(200, { 'content-type': 'text/javascript; charset=utf-8' });
      res.end(js);
      return;
    }
    if (req.method === 'GET' && path === '/app.css') {
      res.writeHead(200, { 'content-type': 'text/css; charset=utf-8' });
      res.end(css);
      return;
    }
    if (!path.startsWith('/api/')) return refuse(res, 404, 'not found');
    const given = (req.headers['x-wxhooks-token'] as string | undefined) ?? u.searchParams.get('token') ?? '';
    if (!same(given, token)) return refuse(res, 403, 'a session token is needed: open the page that listen printed');

    if (req.method === 'GET' && path === '/api/events') {
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-store', connection: 'keep-alive' });
      // the page's own reconnects say where they were: what they missed comes first
      const after = Number(req.headers['last-event-id'] ?? u.searchParams.get('after') ?? 0) || 0;
      const missed = await o.history.since(after);
      res.write(`id: ${missed.at(-1)?.id ?? after}\nevent: ready\ndata: ${JSON.stringify({ rows: missed.map(listedRow) })}\n\n`);
      streams.add(res);
      req.on('close', () => streams.delete(res));
      return;
    }
    if (req.method === 'GET' && path === '/api/deliveries') return json(res, 200, { records: (await o.history.since(Number(u.searchParams.get('after') ?? 0) || 0)).map((r) => fromRow(listedRow(r))) });
    if (req.method === 'GET' && path === '/api/runs') return json(res, 200, { runs: await o.history.runs() });
    const one = /^\/api\/deliveries\/(\d+)(\/replay)?$/.exec(path);
    if (one && !one[2] && req.method === 'GET') {
      const record = await o.history.get(Number(one[1]));
      if (!record) return refuse(res, 404, 'that delivery is no longer kept (see --history)');
      return json(res, 200, { record, attempts: await o.history.attemptsOf(record.id) });
    }
    if (one && one[2]) {
      if (req.method !== 'POST') return refuse(res, 405, 'replay is a POST');
      // cross-site requests are refused: a page elsewhere could guess nothing, but should not even try
      const site = req.headers['sec-fetch-site'];
      const origin = req.headers.origin;
      if ((site !== undefined && site !== 'same-origin') || (origin !== undefined && !allowedHosts.has(origin.replace(/^https?:\/\//, '').toLowerCase()))) {
        return refuse(res, 403, 'replay is only for the inspector page itself');
      }
      if (!o.replay) return refuse(res, 409, 'nowhere to replay to: start listen with --forward-to URL');
      req.resume();
      o.replay(Number(one[1])).then(
        (r) => json(res, r.status, r.body),
        (err: Error) => refuse(res, 500, err.message),
      );
      return;
    }
    return refuse(res, 404, 'not found');
  }

  const server: Server = createServer((req, res) => {
    handle(req, res).catch((err: Error) => {
      if (!res.headersSent) refuse(res, 500, err.message);
    });
  });
  const { port, url } = await listenOn(server, o.host, o.port, '/');
  const shown = shownHost(o.host);
  allowedHosts = new Set([`${shown}:${port}`, `localhost:${port}`, `${o.host}:${port}`].map((h) => h.toLowerCase()));
  return {
    url,
    port,
    token,
    async close() {
      unsubscribe();
      clearInterval(keepAlive);
      // what is in the batch goes now: its timer, firing after the streams have ended, would write to
      // them after their end, an 'error' that nothing listens for
      rows.flush();
      for (const res of streams) res.end();
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
    },
  };
}
