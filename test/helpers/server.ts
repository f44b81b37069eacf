import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Recorded {
  method: string;
  url: string;
  path: string;
  query: Record<string, string>;
  headers: IncomingMessage['headers'];
  body: string;
  json?: unknown;
}

export type Handler = (req: Recorded, res: ServerResponse) => void | Promise<void>;

export interface TestServer {
  url: string;
  port: number;
  requests: Recorded[];
  server: Server;
  close(): Promise<void>;
}

/** A real HTTP server on 127.0.0.1 that records every request and answers through `handler`. */
export async function startServer(handler: Handler): Promise<TestServer> {
  const requests: Recorded[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      const u = new URL(req.url ?? '/', 'http://x');
      const rec: Recorded = {
        method: req.method ?? '',
        url: req.url ?? '',
        path: u.pathname,
        query: Object.fromEntries(u.searchParams),
        headers: req.headers,
        body,
      };
      try {
        rec.json = body ? JSON.parse(body) : undefined;
      } catch {
        // left undefined: not JSON
      }
      requests.push(rec);
      Promise.resolve(handler(rec, res)).catch((err: Error) => {
        res.statusCode = 599;
        res.end(String(err));
      });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    requests,
    server,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

export function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(body === undefined ? '' : JSON.stringify(body));
}

/** A port nothing listens on: bound, then closed. */
export { freePort as closedPort } from '../../scripts/harness.js';

/**
 * An app that holds every answer until each of `n` requests is either at the app or turned away (the
 * test calls `turnedAway()` for those), or `most` are at the app (listen forwards on 64 connections): what
 * listen admitted is then held while the rest arrive, however slowly a busy machine sends them.
 */
export async function holdingApp(n: number, most = 64): Promise<TestServer & { turnedAway(): void }> {
  let arrived = 0;
  let away = 0;
  let released = false;
  const waiting: (() => void)[] = [];
  const release = () => {
    if (released || (arrived + away < n && arrived < most)) return;
    released = true;
    for (const answer of waiting.splice(0)) answer();
  };
  const app = await startServer((_req, res) => {
    arrived++;
    const answer = () => sendJson(res, 200, { ok: true });
    if (released) answer();
    else {
      waiting.push(answer);
      release();
    }
  });
  return Object.assign(app, {
    turnedAway() {
      away++;
      release();
    },
  });
}
