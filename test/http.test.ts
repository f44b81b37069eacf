import { createServer, request as httpRequest } from 'node:http';
import { connect } from 'node:net';
import type { AddressInfo } from 'node:net';
import { EnvHttpProxyAgent } from 'undici';
import { afterAll, describe, expect, it } from 'vitest';
import { HttpClient, describeErrorBody, parseRetryAfter } from '../src/api/http.js';
import { resolveCredentials } from '../src/api/credentials.js';
import { Service } from '../src/api/service.js';
import { AuthError, NotFoundError, RefusedError, UnreachableError } from '../src/errors.js';
import { runCli } from './helpers/cli.js';
import { sendJson, startServer } from './helpers/server.js';

const credentials = resolveCredentials({ WX_API_KEY: 'k_live_abcdef123456' });
const client = (baseUrl: string, extra: Partial<ConstructorParameters<typeof HttpClient>[0]> = {}) => new HttpClient({ baseUrl, credentials, timeoutMs: 5000, retryBaseMs: 5, ...extra });

describe('HttpClient retries', () => {
  it('never retries a POST, even on a 503, and says to check the state first', async () => {
    const s = await startServer((_q, res) => sendJson(res, 503, { message: 'busy' }));
    try {
      const service = new Service(client(s.url));
      const err = await service.createWebhook({ url: 'https://example.com/h' }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(UnreachableError);
      expect(s.requests.length).toBe(1);
      expect((err as UnreachableError).hint).toContain('webhook list');
    } finally {
      await s.close();
    }
  });

  it('never retries a PATCH or DELETE on a connection reset', async () => {
    const s = await startServer((_q, res) => {
      res.socket?.destroy();
    });
    try {
      const service = new Service(client(s.url));
      await expect(service.updateWebhook('7', { name: 'x' })).rejects.toBeInstanceOf(UnreachableError);
      await expect(service.deleteWebhook('7')).rejects.toBeInstanceOf(UnreachableError);
      expect(s.requests.map((r) => r.method)).toEqual(['PATCH', 'DELETE']);
    } finally {
      await s.close();
    }
  });

  it('a write that could not connect says nothing was sent, not to check the state', async () => {
    const { closedPort } = await import('./helpers/server.js');
    const port = await closedPort();
    const err = await new Service(client(`http://127.0.0.1:${port}`)).createWebhook({ url: 'https://example.com/h' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(UnreachableError);
    expect((err as UnreachableError).message).toContain('connection refused');
    expect((err as UnreachableError).hint).toContain('Check --base-url');
  });

  it('retries a GET on a dropped connection, at most 3 times', async () => {
    const s = await startServer((_q, res) => {
      res.socket?.destroy();
    });
    try {
      await expect(new Service(client(s.url)).getWebhook('7')).rejects.toBeInstanceOf(UnreachableError);
      expect(s.requests.length).toBe(4);
    } finally {
      await s.close();
    }
  });

  it('waits as long as Retry-After asks', async () => {
    let n = 0;
    const s = await startServer((_q, res) => (n++ === 0 ? sendJson(res, 503, {}, { 'retry-after': '1' }) : sendJson(res, 200, { authed: true, client_id: 'x' })));
    try {
      const started = Date.now();
      await new Service(client(s.url)).authStatus();
      expect(Date.now() - started).toBeGreaterThanOrEqual(950);
      expect(s.requests.length).toBe(2);
    } finally {
      await s.close();
    }
  });

  it('maps 404, 409 and 422 to typed errors with the service message', async () => {
    const s = await startServer((req, res) => {
      if (req.path.endsWith('/subscriptions')) return sendJson(res, 409, { error: { code: 'conflict', message: 'duplicate type' } });
      if (req.method === 'PATCH') return sendJson(res, 422, { detail: [{ loc: ['body', 'url'], msg: 'invalid url' }] });
      sendJson(res, 404, { error: { message: 'webhook not found' } });
    });
    try {
      const service = new Service(client(s.url));
      const nf = await service.getWebhook('99').catch((e: unknown) => e);
      expect(nf).toBeInstanceOf(NotFoundError);
      expect((nf as Error).message).toContain('webhook 99');
      const dup = await service.addSubscription('7', { subscription_type: 'forecast_hour.available' }).catch((e: unknown) => e);
      expect(dup).toBeInstanceOf(RefusedError);
      expect((dup as Error).message).toContain('already has a forecast_hour.available subscription');
      const bad = await service.updateWebhook('7', { url: 'x' }).catch((e: unknown) => e);
      expect(bad).toBeInstanceOf(RefusedError);
      expect((bad as Error).message).toContain('invalid url (body.url)');
    } finally {
      await s.close();
    }
  });

  it('maps 401 to AuthError', async () => {
    const s = await startServer((_q, res) => sendJson(res, 401, { error: 'nope' }));
    try {
      await expect(new Service(client(s.url)).listWebhooks()).rejects.toBeInstanceOf(AuthError);
    } finally {
      await s.close();
    }
  });
});

async function startProxy() {
  const seen: string[] = [];
  const proxy = createServer((req, res) => {
    // plain forward proxy (absolute-form request line)
    seen.push(`${req.method} ${req.url}`);
    const up = httpRequest(req.url!, { method: req.method, headers: req.headers }, (r) => {
      res.writeHead(r.statusCode!, r.headers);
      r.pipe(res);
    });
    req.pipe(up);
  });
  proxy.on('connect', (req, socket, head) => {
    seen.push(`CONNECT ${req.url}`);
    const [host, port] = req.url!.split(':');
    const upstream = connect(Number(port), host!, () => {
      socket.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      upstream.write(head);
      upstream.pipe(socket);
      socket.pipe(upstream);
    });
  });
  await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`,
    seen,
    close: () => {
      proxy.closeAllConnections();
      proxy.close();
    },
  };
}

describe('HTTP_PROXY', () => {
  const servers: { close(): unknown }[] = [];
  afterAll(() => servers.forEach((s) => s.close()));

  it('HttpClient sends through the dispatcher it is given', async () => {
    const target = await startServer((_q, res) => sendJson(res, 200, { authed: true, client_id: 'via-proxy' }));
    const proxy = await startProxy();
    servers.push(target, proxy);
    const dispatcher = new EnvHttpProxyAgent({ httpProxy: proxy.url, noProxy: '' });
    const status = await new Service(client(target.url, { dispatcher })).authStatus();
    expect(status.client_id).toBe('via-proxy');
    expect(proxy.seen).toHaveLength(1);
    expect(proxy.seen[0]).toContain(`127.0.0.1:${target.port}`);
    await dispatcher.close();
  });

  it('the CLI honours HTTP_PROXY, and NO_PROXY', async () => {
    const target = await startServer((_q, res) => sendJson(res, 200, { authed: true, client_id: 'c' }));
    const proxy = await startProxy();
    servers.push(target, proxy);
    const env = { WX_API_KEY: 'k_123456', WX_BASE_URL: target.url, HTTP_PROXY: proxy.url };
    const via = await runCli(['auth', 'status'], { env });
    expect(via.code).toBe(0);
    expect(proxy.seen).toHaveLength(1);
    const direct = await runCli(['auth', 'status'], { env: { ...env, NO_PROXY: '127.0.0.1' } });
    expect(direct.code).toBe(0);
    expect(proxy.seen).toHaveLength(1);
    expect(target.requests).toHaveLength(2);
  });
});

describe('error bodies', () => {
  it('picks the service words from the usual shapes', () => {
    expect(describeErrorBody('{"error":{"code":"x","message":"bad url"}}')).toBe('bad url');
    expect(describeErrorBody('{"message":"m"}')).toBe('m');
    expect(describeErrorBody('{"detail":"d"}')).toBe('d');
    expect(describeErrorBody('{"error":"e"}')).toBe('e');
    expect(describeErrorBody('<h1>Bad Gateway</h1>')).toBe('Bad Gateway');
    expect(describeErrorBody('plain\ntext')).toBe('plain text');
    expect(describeErrorBody('x'.repeat(1000)).length).toBeLessThan(310);
    expect(describeErrorBody('')).toBe('');
  });

  it('reads Retry-After as seconds or a date', () => {
    expect(parseRetryAfter('3')).toBe(3000);
    expect(parseRetryAfter(new Date(10_000).toUTCString(), 4000)).toBe(6000);
    expect(parseRetryAfter('soon')).toBeUndefined();
    expect(parseRetryAfter(undefined)).toBeUndefined();
  });
});
