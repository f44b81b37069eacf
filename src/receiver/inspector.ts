import { randomBytes, timingSafeEqual } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { networkInterfaces } from 'node:os';
import { StorageError } from '../errors.js';
import { LineBuffer } from '../util/line-buffer.js';
import { listenOn, shownHost } from '../util/net.js';
import { verified } from './event.js';
import type { DeliveryRecord, HistorySource } from './history.js';
import type { RunsView } from '../delivery/runs.js';
import type { RunFigures } from '../observe/figures.js';
import { fromRow, listedRow } from './listed.js';
import { REPLAY_REFUSALS } from './replay.js';
import * as DEFAULTS from '../delivery/defaults.js';

/**
 * The inspector page's server: a handful of routes behind two checks. Every request's Host must be one
 * the inspector answers to (its bound address, `localhost`, and the names given with --inspect-host: a
 * DNS-rebinding page gets nothing); the page and every `/api/` request must carry the session's token,
 * which only the link `listen` prints holds. A replay must also come from the page's own origin, and
 * only bytes that verified are ever signed again. The webhook's secret never leaves `listen`.
 */
export interface InspectorOptions {
  host: string;
  port: number;
  /** Host names the page may also be reached by (`--inspect-host`), besides the bound address and localhost. */
  hostNames?: string[];
  history: HistorySource;
  /** Re-sends delivery `id` to the app (with `body` in place of its own, when edited); undefined when there is nowhere to send it (no --forward-to). */
  replay?: (id: number, body?: Buffer) => Promise<{ status: number; body: unknown }>;
  /** Commands that send delivery `id` again (curl with fresh signature headers, `wxhooks send`): verified deliveries only. */
  commands?: (id: number) => Promise<{ status: number; body: unknown }>;
  /** What the page says of this listen (its URL, the app it forwards to, the hours a run should have). */
  about: Record<string, unknown>;
  /** The session's token: given (kept from an earlier listen, so that an open page can reconnect to a restarted one), else made now. */
  token?: string;
  /** `listen --watch-runs`: the notifications late at its last look, for the Runs view. */
  late?: () => NonNullable<RunsView['late']>;
  /** The figures of this run (src/observe/figures.ts): the page's Figures view and `wxhooks mcp`'s metrics tool. */
  figures?: () => RunFigures;
}

export interface RunningInspector {
  /** The page's address, with the session's token: what `listen` prints, and the only way in. */
  url: string;
  port: number;
  token: string;
  close(): Promise<void>;
}

/** How often the page's stream gets what happened since (events are batched, so a busy listen sends a message, not a thousand). */
const BATCH_MS = 100;
const KEEP_ALIVE_MS = 15_000;
/**
 * The most a page's stream may hold written and not yet read (past what the socket itself holds). A page
 * that stops reading (a frozen tab) would otherwise keep every row sent since, in `listen`, at whatever
 * pace anonymous senders set: 20,000 refused requests took `listen` from 55 to 452 MiB in 6 s (#32.5).
 * Past it, the stream is sent nothing more; once it drains, it is ended, and the page reconnects and
 * fills in what it missed (Last-Event-ID); one that does not drain within LAGGING_MS is cut.
 */
const STREAM_UNREAD_MAX = 1024 * 1024;
const LAGGING_MS = 2 * KEEP_ALIVE_MS;
/** How soon a page reconnects to a stream that was ended (the browser's own default is 3 s). */
const RECONNECT_MS = 1000;

/** A page's stream. */
interface Stream {
  /** The bytes it may hold unread: STREAM_UNREAD_MAX, and its first message (what it missed, bounded by the history). */
  most: number;
  /** Until its first message is written: what came for it meanwhile (`most` counts them down). */
  waiting?: Buffer[];
}

/** The built page: dist/inspector/ beside dist/bin/ (the bundle) and dist/receiver/ (tsc); from src/ in the tests. */
function assets(): { js: string; css: string } {
  for (const dir of ['../inspector/', '../../dist/inspector/']) {
    const js = new URL(`${dir}app.js`, import.meta.url);
    if (existsSync(js)) return { js: readFileSync(js, 'utf8'), css: readFileSync(new URL(`${dir}app.css`, import.meta.url), 'utf8') };
  }
  throw new Error('the inspector page is not built: run `npm run build`');
}

const PAGE_CSP = "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; frame-ancestors 'none'";

/** The page; the token is not in it (the page reads it from its own address). */
function page(about: Record<string, unknown>): string {
  const config = JSON.stringify(about).replace(/</g, '\\u003c');
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>wxhooks inspector</title><link rel="icon" href="/favicon.svg"><link rel="stylesheet" href="/app.css"></head>
<body><script id="config" type="application/json">${config}</script><div id="app"></div><script src="/app.js"></script></body></html>`;
}

/** What a request without the token is shown: where to find the way in, and nothing else. */
const KNOCK = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>wxhooks inspector</title></head>
<body style="font: 15px system-ui, sans-serif; max-width: 40em; margin: 3em auto; padding: 0 1em">
<h1 style="font-size: 1.3em">wxhooks inspector</h1>
<p>Open the link that <code>wxhooks listen --inspect</code> printed when it started: it carries this session's token, and the page needs it.</p>
<p>A restarted <code>listen</code> prints a new one.</p></body></html>`;

const FAVICON = `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32"><rect width="32" height="32" rx="6" fill="#3559b5"/><path d="M6 20c4-8 8 8 12 0s6-8 8-4" stroke="#fff" stroke-width="3" fill="none" stroke-linecap="round"/></svg>`;

/** Whether the token given is the session's: their bytes compared (a string of the same length in characters may be longer in bytes, which timingSafeEqual refuses with an error: #32.16). */
function same(given: string, token: string): boolean {
  const a = Buffer.from(given, 'utf8');
  const b = Buffer.from(token, 'utf8');
  return a.length === b.length && timingSafeEqual(a, b);
}

/** The host names (with the port) a request may name: the bound address as shown, localhost, the names given, and every address of this machine when bound to all. */
function hostsFor(host: string, port: number, names: string[]): Set<string> {
  const hosts = [shownHost(host), 'localhost', host, ...names];
  if (host === '0.0.0.0' || host === '::') {
    for (const list of Object.values(networkInterfaces())) for (const a of list ?? []) hosts.push(a.family === 'IPv6' ? `[${a.address}]` : a.address);
  }
  return new Set(hosts.map((h) => `${h.includes(':') && !h.startsWith('[') ? `[${h}]` : h}:${port}`.toLowerCase()));
}

/** The most bytes an edited body for a replay may have. */
const EDITED_BODY_MAX = DEFAULTS.maxBodyBytes;

/** A request's body, whole, up to `max` bytes (more: undefined). */
function readSmall(req: IncomingMessage, max: number): Promise<Buffer | undefined> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > max) {
        req.destroy();
        resolve(undefined);
      } else chunks.push(c);
    });
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', () => resolve(undefined));
  });
}

export async function startInspector(o: InspectorOptions): Promise<RunningInspector> {
  const token = o.token ?? randomBytes(24).toString('base64url');
  /** This listen's run: a page that sees another knows listen restarted (its ids begin again). */
  const session = randomBytes(6).toString('hex');
  const { js, css } = assets();
  const streams = new Map<ServerResponse, Stream>();
  /** Streams past it, sent nothing more, and since when. */
  const lagging = new Map<ServerResponse, number>();
  let allowedHosts: Set<string>;
  /** Whether `res` may be written to now: a stream that holds too much unread is sent nothing more, and ended once it drains. */
  const writable = (res: ServerResponse, most: number): boolean => {
    if (res.writableLength <= most) return true;
    streams.delete(res);
    lagging.set(res, Date.now());
    res.once('drain', () => {
      lagging.delete(res);
      res.end();
    });
    return false;
  };

  // The stream's messages: one `data:` line per record (a row, src/receiver/listed.ts), written into a
  // buffer as each record comes, then the id of the last one. Records kept in an array until the batch
  // was sent (100 ms) outlived V8's young generation, every one of them: measured with perf at 50
  // clients, V8's marking took 1.5% of `listen --inspect`'s CPU so, 0.0-0.4% with each row written as
  // its record comes, and sweeping 0.56% against 0.28% (BENCHMARKS.md).
  let lastRow = 0;
  const rows = new LineBuffer((chunk) => {
    const end = Buffer.from(`id: ${lastRow}\nevent: deliveries\n\n`);
    for (const [res, s] of streams) {
      if (s.waiting) {
        s.waiting.push(chunk, end);
        s.most -= chunk.length + end.length;
        if (s.most < 0) s.waiting = []; // too much meanwhile: it is ended after its first message, and reconnects from there
      } else if (writable(res, s.most)) {
        res.write(chunk);
        res.write(end);
      }
    }
  }, BATCH_MS);
  const unsubscribe = o.history.subscribe((row, id) => {
    if (!streams.size) return;
    rows.push(`data: ${JSON.stringify(row)}`);
    lastRow = id;
  });
  const keepAlive = setInterval(() => {
    for (const [res, s] of streams) if (!s.waiting && writable(res, s.most)) res.write(': keep-alive\n\n');
    // a page that has read nothing for this long (a tab frozen for good) lets go of what it holds
    for (const [res, since] of lagging) if (Date.now() - since > LAGGING_MS) lagging.delete(res), res.destroy();
  }, KEEP_ALIVE_MS).unref();

  const json = (res: ServerResponse, status: number, body: unknown) => {
    const text = JSON.stringify(body);
    res.writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store', 'content-length': Buffer.byteLength(text) });
    res.end(text);
  };
  const refuse = (res: ServerResponse, status: number, error: string, extra: Record<string, unknown> = {}) => json(res, status, { error, ...extra });
  const html = (res: ServerResponse, status: number, text: string) => {
    res.writeHead(status, { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store', 'content-security-policy': PAGE_CSP });
    res.end(text);
  };

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    res.setHeader('x-content-type-options', 'nosniff');
    res.setHeader('referrer-policy', 'no-referrer');
    if (!allowedHosts.has((req.headers.host ?? '').toLowerCase())) {
      return refuse(res, 421, 'this inspector answers only at its own address (or a name given with --inspect-host)');
    }
    const u = new URL(req.url ?? '/', 'http://inspector');
    const path = u.pathname;
    // the page's code and look hold nothing of the session: anyone may have them
    if (req.method === 'GET' && path === '/app.js') {
      res.writeHead(200, { 'content-type': 'text/javascript; charset=utf-8', 'cache-control': 'no-cache' });
      res.end(js);
      return;
    }
    if (req.method === 'GET' && path === '/app.css') {
      res.writeHead(200, { 'content-type': 'text/css; charset=utf-8', 'cache-control': 'no-cache' });
      res.end(css);
      return;
    }
    if (req.method === 'GET' && path === '/favicon.svg') {
      res.writeHead(200, { 'content-type': 'image/svg+xml', 'cache-control': 'max-age=86400' });
      res.end(FAVICON);
      return;
    }
    const given = (req.headers['x-wxhooks-token'] as string | undefined) ?? u.searchParams.get('token') ?? '';
    const allowed = same(given, token);
    if (req.method === 'GET' && path === '/') return allowed ? html(res, 200, page({ ...o.about, session })) : html(res, 401, KNOCK);
    if (!path.startsWith('/api/')) return refuse(res, 404, 'not found');
    if (!allowed) return refuse(res, 403, 'a session token is needed: open the link that listen printed', { restarted: given !== '' });

    if (req.method === 'GET' && path === '/api/events') {
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-store', connection: 'keep-alive' });
      // the page's own reconnects say where they were: what they missed comes first
      const after = Number(req.headers['last-event-id'] ?? u.searchParams.get('after') ?? 0) || 0;
      // taking rows from now on, before what it missed is read: a row that comes while it is read (from
      // the shared store, it may take a while) would be in neither (#32.12); a row in both is shown once
      const stream: Stream = { most: STREAM_UNREAD_MAX, waiting: [] };
      streams.set(res, stream);
      req.on('close', () => {
        streams.delete(res);
        lagging.delete(res);
      });
      let missed: DeliveryRecord[];
      try {
        missed = await o.history.since(after);
      } catch {
        // the history cannot be read now (its database is away): the page tries again shortly, from where it was
        streams.delete(res);
        if (!res.writableEnded) res.end(`retry: ${RECONNECT_MS * 5}\n\n`);
        return;
      }
      if (!streams.has(res) || res.writableEnded) return; // gone meanwhile, or the inspector closed
      const ready = `retry: ${RECONNECT_MS}\nid: ${missed.at(-1)?.id ?? after}\nevent: ready\ndata: ${JSON.stringify({ session, rows: missed.map((r) => listedRow(r, r.id, r.replay_of)) })}\n\n`;
      res.write(ready);
      const came = stream.waiting!;
      const cameBytes = STREAM_UNREAD_MAX - stream.most;
      stream.waiting = undefined;
      if (stream.most < 0) {
        streams.delete(res);
        res.end();
        return;
      }
      for (const chunk of came) res.write(chunk);
      stream.most = STREAM_UNREAD_MAX + Buffer.byteLength(ready) + cameBytes;
      return;
    }
    if (req.method === 'GET' && path === '/api/deliveries') {
      const records = await o.history.since(Number(u.searchParams.get('after') ?? 0) || 0);
      return json(res, 200, { records: records.map((r) => fromRow(listedRow(r, r.id, r.replay_of))) });
    }
    if (req.method === 'GET' && path === '/api/runs') return json(res, 200, { ...(await o.history.runs()), expect_hours: o.about.expect_hours ?? null, ...(o.late ? { late: o.late() } : {}) });
    if (req.method === 'GET' && path === '/api/metrics') return o.figures ? json(res, 200, o.figures()) : refuse(res, 404, 'this listen keeps no figures');
    if (req.method === 'GET' && path === '/api/search') {
      const q = (u.searchParams.get('q') ?? '').trim();
      return json(res, 200, { ids: q ? await o.history.search(q, 5000) : [] });
    }
    const one = /^\/api\/deliveries\/(\d+)(\/replay|\/commands)?$/.exec(path);
    if (one && one[2] === '/commands' && req.method === 'GET') {
      if (!o.commands) return refuse(res, 409, 'no commands here');
      const r = await o.commands(Number(one[1]));
      return json(res, r.status, r.body);
    }
    if (one && !one[2] && req.method === 'GET') {
      const record = await o.history.get(Number(one[1]));
      if (!record) return refuse(res, 404, REPLAY_REFUSALS.gone().error);
      return json(res, 200, { record, attempts: await o.history.attemptsOf(record.id) });
    }
    if (one && one[2] === '/replay') {
      if (req.method !== 'POST') return refuse(res, 405, 'replay is a POST');
      // cross-site requests are refused: a page elsewhere could guess nothing, but should not even try
      const site = req.headers['sec-fetch-site'];
      const origin = req.headers.origin;
      if ((site !== undefined && site !== 'same-origin') || (origin !== undefined && !allowedHosts.has(origin.replace(/^https?:\/\//, '').toLowerCase()))) {
        return refuse(res, 403, 'replay is only for the inspector page itself');
      }
      if (!o.replay) return refuse(res, 409, 'nowhere to replay to: start listen with --forward-to URL');
      const record = await o.history.get(Number(one[1]));
      const refusal = !record ? REPLAY_REFUSALS.gone() : !verified(record) ? REPLAY_REFUSALS.notVerified(record) : undefined;
      if (!record || refusal) return refuse(res, refusal!.status, refusal!.error);
      // with changes: the page sends the edited body (JSON: {"body": "..."}); it is marked as edited
      const sent = await readSmall(req, EDITED_BODY_MAX + 1024);
      let edited: Buffer | undefined;
      if (sent?.length) {
        try {
          const given = (JSON.parse(sent.toString('utf8')) as { body?: unknown }).body;
          if (typeof given === 'string') edited = Buffer.from(given, 'utf8');
        } catch {
          return refuse(res, 400, 'a replay with changes is sent as {"body": "..."}');
        }
      }
      o.replay(record.id, edited).then(
        (r) => json(res, r.status, r.body),
        (err: Error) => refuse(res, 500, err.message),
      );
      return;
    }
    return refuse(res, 404, 'not found');
  }

  const server: Server = createServer((req, res) => {
    handle(req, res).catch((err: Error) => {
      // a history that cannot be read now (its database is away) is no bug here: 503, and the page tries again
      if (!res.headersSent) refuse(res, err instanceof StorageError ? 503 : 500, err.message);
    });
  });
  const { port, url } = await listenOn(server, o.host, o.port, '/');
  allowedHosts = hostsFor(o.host, port, o.hostNames ?? []);
  return {
    url: `${url}?token=${token}`,
    port,
    token,
    async close() {
      unsubscribe();
      clearInterval(keepAlive);
      // what is in the batch goes now: its timer, firing after the streams have ended, would write to
      // them after their end, an 'error' that nothing listens for
      rows.flush();
      for (const res of streams.keys()) res.end();
      for (const res of lagging.keys()) res.destroy();
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
    },
  };
}
