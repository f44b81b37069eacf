import { createHmac } from 'node:crypto';
import { readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closedPort, sendJson, startServer, type TestServer } from './helpers/server.js';
import { runCli, tempDir } from './helpers/cli.js';

const KEY = 'sk_test_SuperSecretKey_1234567890';
const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string };

let ok: TestServer;
beforeAll(async () => {
  ok = await startServer((req, res) => {
    if (req.path === '/debug/v1/auth_status') {
      const auth = req.headers.authorization ?? '';
      if (auth === `Bearer ${KEY}` || auth.startsWith('Basic ')) return sendJson(res, 200, { authed: true, client_id: 'client-42' });
      return sendJson(res, 401, { error: { code: 'unauthorized', message: 'invalid API key' } });
    }
    sendJson(res, 404, { error: 'no route' });
  });
});
afterAll(() => ok.close());

describe('wxhooks --version and --help', () => {
  it('prints the version alone', async () => {
    const r = await runCli(['--version']);
    expect(r.code).toBe(0);
    expect(r.stdout).toBe(`${pkg.version}\n`);
    expect(r.stderr).toBe('');
  });

  it('shows help with examples and the exit codes', async () => {
    const r = await runCli(['--help']);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('auth');
    expect(r.stdout).toContain('Examples:');
    expect(r.stdout).toContain('Exit codes:');
  });

  it.each([[[]], [['webhook', 'create']], [['listen']]])('the binary prints the pre-rendered help of %j, as commander renders it', async (words) => {
    const fast = await runCli([...words, '--help']);
    const slow = await runCli(['--no-color', ...words, '--help']); // an option first: commander renders it
    expect(fast.code).toBe(0);
    expect(fast.stdout).toBe(slow.stdout);
    expect(fast.stdout).toContain('Usage: wxhooks');
  });

  it('auth status --help names the environment variable', async () => {
    const r = await runCli(['auth', 'status', '--help']);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('WX_API_KEY');
    expect(r.stdout).toContain('--json');
  });
});

describe('auth status', () => {
  it('sends Bearer and the User-Agent on the wire, and shows client id, scheme and base URL', async () => {
    const before = ok.requests.length;
    const r = await runCli(['auth', 'status'], { env: { WX_API_KEY: KEY, WX_BASE_URL: ok.url } });
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const req = ok.requests[before]!;
    expect(req.method).toBe('GET');
    expect(req.path).toBe('/debug/v1/auth_status');
    expect(req.headers.authorization).toBe(`Bearer ${KEY}`);
    expect(req.headers['user-agent']).toBe(`wxhooks/${pkg.version} node/${process.versions.node}`);
    expect(r.stdout).toContain('✓');
    expect(r.stdout).toContain('client-42');
    expect(r.stdout).toContain('Bearer');
    expect(r.stdout).toContain(ok.url);
    expect(r.stdout).not.toContain(KEY);
  });

  it('a client id and a legacy key: Basic with the client id and a token signed with the key (the binary, on the wire)', async () => {
    const before = ok.requests.length;
    const r = await runCli(['auth', 'status'], { env: { WX_API_KEY: KEY, WX_CLIENT_ID: 'client_42', WX_BASE_URL: ok.url } });
    expect(r.code).toBe(0);
    const [user, token] = Buffer.from(ok.requests[before]!.headers.authorization!.slice(6), 'base64').toString().split(/:(.*)/s);
    expect(user).toBe('client_42');
    const [head, body, signature] = token!.split('.');
    expect(signature).toBe(createHmac('sha256', KEY).update(`${head}.${body}`).digest('base64url'));
    expect(r.stdout).toContain('Basic (legacy');
    expect(r.stdout + r.stderr).not.toContain(token!);
  });

  it('--auth basic without a client id is a usage error before any request', async () => {
    const before = ok.requests.length;
    const r = await runCli(['auth', 'status', '--auth', 'basic'], { env: { WX_API_KEY: KEY, WX_BASE_URL: ok.url } });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('WX_CLIENT_ID');
    expect(ok.requests.length).toBe(before);
  });

  it('--json prints the service object alone on stdout', async () => {
    const r = await runCli(['auth', 'status', '--json'], { env: { WX_API_KEY: KEY, WX_BASE_URL: ok.url } });
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual({ authed: true, client_id: 'client-42', credentials: { scheme: 'bearer', key_from: 'WX_API_KEY', client_id: null, client_id_from: null } });
    expect(r.stderr).toBe('');
  });

  it('a missing key exits 3 and says how to set it on each platform', async () => {
    const r = await runCli(['auth', 'status'], { env: { WX_BASE_URL: ok.url } });
    expect(r.code).toBe(3);
    expect(r.stderr).toContain('neither WX_API_KEY nor WB_API_KEY is set');
    expect(r.stderr).toContain('export WX_API_KEY=');
    expect(r.stderr).toContain('setx WX_API_KEY');
    expect(r.stderr).not.toMatch(/\n\s+at /); // no stack trace
    expect(r.stdout).toBe('');
  });

  it('--verbose adds the stack to an error', async () => {
    const r = await runCli(['auth', 'status', '--verbose'], { env: { WX_BASE_URL: ok.url } });
    expect(r.code).toBe(3);
    expect(r.stderr).toMatch(/AuthError: No API key: neither WX_API_KEY nor WB_API_KEY is set\.\n\s+at /);
  });

  it('an empty key exits 3', async () => {
    const r = await runCli(['auth', 'status'], { env: { WX_API_KEY: '  ', WX_BASE_URL: ok.url } });
    expect(r.code).toBe(3);
    expect(r.stderr).toContain('WX_API_KEY is empty');
  });

  it('a 401 exits 3 with the service message, and never shows the key', async () => {
    const r = await runCli(['auth', 'status'], { env: { WX_API_KEY: 'wrong-key-abcdef', WX_BASE_URL: ok.url } });
    expect(r.code).toBe(3);
    expect(r.stderr).toContain('401');
    expect(r.stderr).toContain('invalid API key');
    expect(r.stderr).not.toContain('wrong-key-abcdef');
  });

  it('authed: false exits 3, and --json still prints the object', async () => {
    const s = await startServer((_req, res) => sendJson(res, 200, { authed: false, client_id: 'c' }));
    try {
      const r = await runCli(['auth', 'status', '--json'], { env: { WX_API_KEY: KEY, WX_BASE_URL: s.url } });
      expect(r.code).toBe(3);
      expect(JSON.parse(r.stdout)).toMatchObject({ authed: false, client_id: 'c' });
      expect(r.stderr).toContain('authed: false');
    } finally {
      await s.close();
    }
  });

  it('a 403 exits 3', async () => {
    const s = await startServer((_req, res) => sendJson(res, 403, { detail: 'trial expired' }));
    try {
      const r = await runCli(['auth', 'status'], { env: { WX_API_KEY: KEY, WX_BASE_URL: s.url } });
      expect(r.code).toBe(3);
      expect(r.stderr).toContain('trial expired');
    } finally {
      await s.close();
    }
  });

  it('an unreachable service exits 6 quickly, naming the emulator', async () => {
    const port = await closedPort();
    const r = await runCli(['auth', 'status'], {
      env: { WX_API_KEY: KEY, WX_BASE_URL: `http://127.0.0.1:${port}` },
      retryBaseMs: 10,
    });
    expect(r.code).toBe(6);
    expect(r.stderr).toContain('connection refused');
    expect(r.stderr).toContain('wxhooks emulator');
  });

  it('a service that never answers exits 6 within --timeout, without hanging', async () => {
    const s = await startServer(() => undefined /* never answers */);
    try {
      const r = await runCli(['auth', 'status', '--timeout', '800ms'], { env: { WX_API_KEY: KEY, WX_BASE_URL: s.url } });
      expect(r.code).toBe(6);
      expect(r.stderr).toContain('did not answer within 800ms');
      expect(r.ms).toBeLessThan(8000);
    } finally {
      await s.close();
    }
  });

  it('a 5xx storm: the GET is tried 4 times, honouring Retry-After, then exits 6 with the service message', async () => {
    const s = await startServer((_req, res) => sendJson(res, 503, { message: 'down for maintenance' }, { 'retry-after': '0' }));
    try {
      const r = await runCli(['auth', 'status'], { env: { WX_API_KEY: KEY, WX_BASE_URL: s.url } });
      expect(r.code).toBe(6);
      expect(s.requests.length).toBe(4);
      expect(r.stderr).toContain('503');
      expect(r.stderr).toContain('after 4 attempts');
      expect(r.stderr).toContain('down for maintenance');
    } finally {
      await s.close();
    }
  });

  it('recovers when a 502 is followed by a 200', async () => {
    let n = 0;
    const s = await startServer((_req, res) => (n++ === 0 ? sendJson(res, 502, { error: 'bad gateway' }) : sendJson(res, 200, { authed: true, client_id: 'c9' })));
    try {
      const r = await runCli(['auth', 'status'], { env: { WX_API_KEY: KEY, WX_BASE_URL: s.url }, retryBaseMs: 10 });
      expect(r.code).toBe(0);
      expect(s.requests.length).toBe(2);
      expect(r.stdout).toContain('c9');
    } finally {
      await s.close();
    }
  });

  it('a 500 is not retried and a non-JSON body is shown by its start', async () => {
    const s = await startServer((_req, res) => {
      res.writeHead(500, { 'content-type': 'text/html' });
      res.end('<html><body><h1>Internal Server Error</h1> upstream crashed</body></html>');
    });
    try {
      const r = await runCli(['auth', 'status'], { env: { WX_API_KEY: KEY, WX_BASE_URL: s.url } });
      expect(r.code).toBe(6);
      expect(s.requests.length).toBe(1);
      expect(r.stderr).toContain('Internal Server Error upstream crashed');
    } finally {
      await s.close();
    }
  });

  it('--verbose logs requests with the key redacted, even when the service echoes it', async () => {
    const s = await startServer((req, res) => sendJson(res, 401, { message: `bad key ${req.headers.authorization}` }));
    try {
      const r = await runCli(['auth', 'status', '--verbose'], { env: { WX_API_KEY: KEY, WX_BASE_URL: s.url } });
      expect(r.code).toBe(3);
      expect(r.stderr).toContain(`GET ${s.url}/debug/v1/auth_status`);
      expect(r.stderr).toContain('Bearer ***');
      expect(r.stderr).toContain('401');
      expect(r.stderr + r.stdout).not.toContain(KEY);
      expect(r.stderr).not.toContain(KEY.slice(0, 20));
    } finally {
      await s.close();
    }
  });
});

describe('the base URL', () => {
  it('precedence: flag over WX_BASE_URL over the stored setting', async () => {
    const a = await startServer((_q, res) => sendJson(res, 200, { authed: true, client_id: 'from-flag' }));
    const b = await startServer((_q, res) => sendJson(res, 200, { authed: true, client_id: 'from-env' }));
    const c = await startServer((_q, res) => sendJson(res, 200, { authed: true, client_id: 'from-setting' }));
    const dir = tempDir();
    try {
      const set = await runCli(['config', 'set', 'base-url', `${c.url}/`], { env: { WXHOOKS_CONFIG_DIR: dir } });
      expect(set.code).toBe(0);
      const env = { WX_API_KEY: KEY, WXHOOKS_CONFIG_DIR: dir };
      const viaSetting = await runCli(['auth', 'status', '--json'], { env });
      expect(JSON.parse(viaSetting.stdout).client_id).toBe('from-setting');
      const viaEnv = await runCli(['auth', 'status', '--json'], { env: { ...env, WX_BASE_URL: b.url } });
      expect(JSON.parse(viaEnv.stdout).client_id).toBe('from-env');
      const viaFlag = await runCli(['auth', 'status', '--json', '--base-url', a.url], { env: { ...env, WX_BASE_URL: b.url } });
      expect(JSON.parse(viaFlag.stdout).client_id).toBe('from-flag');
      const pretty = await runCli(['auth', 'status'], { env });
      expect(pretty.stdout).toContain('the base-url setting');
    } finally {
      await Promise.all([a.close(), b.close(), c.close()]);
    }
  });
});

describe('config', () => {
  it('set, get, list, unset and path; the folder is 0700 and the file 0600', async () => {
    const dir = `${tempDir()}/nested/store`;
    const env = { WXHOOKS_CONFIG_DIR: dir };
    expect((await runCli(['config', 'set', 'base-url', 'http://127.0.0.1:8788'], { env })).code).toBe(0);
    const got = await runCli(['config', 'get', 'base-url'], { env });
    expect(got.stdout).toBe('http://127.0.0.1:8788\n');
    const list = await runCli(['config', 'list', '--json'], { env });
    expect(JSON.parse(list.stdout)).toEqual({ 'base-url': 'http://127.0.0.1:8788' });
    const path = await runCli(['config', 'path', '--json'], { env });
    const paths = JSON.parse(path.stdout) as { dir: string; settings: string };
    expect(paths.dir).toBe(dir);
    expect(statSync(dir).mode & 0o777).toBe(0o700);
    expect(statSync(paths.settings).mode & 0o777).toBe(0o600);
    expect((await runCli(['config', 'unset', 'base-url'], { env })).code).toBe(0);
    expect(JSON.parse((await runCli(['config', 'list', '--json'], { env })).stdout)).toEqual({});
  });

  it('a folder it cannot use, or a damaged settings file, is a clear error (exit 2), not a bug', async () => {
    const dir = tempDir();
    writeFileSync(join(dir, 'a-file'), 'x');
    const blocked = { WXHOOKS_CONFIG_DIR: join(dir, 'a-file', 'store') };
    for (const args of [
      ['config', 'set', 'base-url', 'http://127.0.0.1:8788'],
      ['config', 'list'],
      ['secret', 'list'],
    ]) {
      const r = await runCli(args, { env: blocked });
      expect(r.code, args.join(' ')).toBe(2);
      expect(r.stderr).toContain(`${join(dir, 'a-file', 'store')}`);
      expect(r.stderr).toContain('a part of the path is a file, not a folder (ENOTDIR)');
      expect(r.stderr).toContain('WXHOOKS_CONFIG_DIR');
      expect(r.stderr).not.toMatch(/bug|\n\s+at /);
    }
    const store = tempDir();
    writeFileSync(join(store, 'settings.json'), '{"base-url": ');
    for (const args of [
      ['config', 'list'],
      ['config', 'set', 'base-url', 'http://127.0.0.1:8788'],
      ['webhook', 'list'],
    ]) {
      const r = await runCli(args, { env: { WXHOOKS_CONFIG_DIR: store, WX_API_KEY: KEY } });
      expect(r.code, args.join(' ')).toBe(2);
      expect(r.stderr).toContain(`The settings file ${join(store, 'settings.json')} is damaged`);
      expect(r.stderr).not.toContain(KEY);
    }
    expect(readFileSync(join(store, 'settings.json'), 'utf8')).toBe('{"base-url": ');
  });

  it('refuses unknown keys and bad values with exit 2', async () => {
    const a = await runCli(['config', 'set', 'colour', 'blue']);
    expect(a.code).toBe(2);
    expect(a.stderr).toContain('base-url');
    const b = await runCli(['config', 'set', 'base-url', 'nope']);
    expect(b.code).toBe(2);
  });
});
