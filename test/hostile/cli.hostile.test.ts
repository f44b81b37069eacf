import { chmodSync, mkdirSync, readFileSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli, tempDir } from '../helpers/cli.js';
import { runInProcess } from '../helpers/context.js';
import { sendJson, startServer, type TestServer } from '../helpers/server.js';

// A service (or anything at --base-url) that echoes what it is sent, or answers with escape sequences.

const CLIENT = 'acme';
const LEGACY = 'L'.repeat(32);
const CURRENT = `wb_${Buffer.from(`${CLIENT}:${'S'.repeat(32)}`).toString('base64')}`;
const ESC = '\u001b';
const _HOSTILE = `${ESC}]0;owned${'\u0007'}${ESC}[2J${ESC}]8;;http://evil${ESC}\\click${ESC}]8;;${ESC}\\\u009b31m`;

let echo: TestServer;
beforeAll(async () => {
  echo = await startServer((req, res) => {
    const auth = req.headers.authorization ?? '';
    if (req.path === '/debug/v1/auth_status' && req.query.mode !== 'x') return sendJson(res, 401, { detail: `bad credentials: auth was ${auth}` });
    if (req.method === 'POST') return sendJson(res, 400, { error: { message: `refused; you sent ${auth} and ${Buffer.from(auth.split(' ')[1] ?? '', 'base64').toString()}` } });
    if (req.path.endsWith('/ping')) return sendJson(res, 500, { message: `receiver failed for ${auth}` });
    return sendJson(res, 503, { message: `down; echo ${auth}` });
  });
});
afterAll(() => echo.close());

describe('secrets never shown: every form of the credential, on every error path', () => {
  const forms: [string, Record<string, string>][] = [
    ['a current key', { WX_API_KEY: CURRENT }],
    ['a bare key', { WX_API_KEY: LEGACY }],
    ['a legacy client id and key (Basic, a signed token)', { WB_CLIENT_ID: CLIENT, WB_API_KEY: LEGACY }],
  ];
  it.each(forms)('%s', async (_name, env) => {
    const secrets = [LEGACY, CURRENT, 'S'.repeat(32), Buffer.from(`${CLIENT}:${LEGACY}`).toString('base64')];
    for (const args of [
      ['auth', 'status'],
      ['auth', 'status', '--verbose'],
      ['webhook', 'list', '--verbose'],
      ['webhook', 'create', '--url', 'https://example.com/', '--no-save'],
      ['ping', '1', '2', '--verbose'],
    ]) {
      const r = await runInProcess(args, { env: { ...env, WX_BASE_URL: echo.url } });
      expect(r.code, args.join(' ')).not.toBe(0);
      const shown = r.stdout + r.stderr;
      expect(shown).toContain('***'); // the service did echo it: it was taken out
      for (const secret of secrets) expect(shown, `${args.join(' ')}: ${shown}`).not.toContain(secret);
      expect(shown).not.toMatch(/eyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+/); // no token
    }
  });
});

describe('the store folder: modes kept, secrets only where others cannot write', () => {
  it('a shared folder (1777) keeps its mode, and secrets are refused there (exit 2)', async () => {
    const shared = join(tempDir(), 'shared');
    mkdirSync(shared);
    chmodSync(shared, 0o1777);
    const r = await runCli(['secret', 'set', '7', '-'], { env: { WXHOOKS_CONFIG_DIR: shared, WX_BASE_URL: 'http://127.0.0.1:9' }, stdin: 'whsec_x' });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('Secrets are not stored in');
    expect(statSync(shared).mode & 0o7777).toBe(0o1777);
    // settings are not secret: they may live there, and the mode is still kept
    const set = await runCli(['config', 'set', 'base-url', 'http://127.0.0.1:9'], { env: { WXHOOKS_CONFIG_DIR: shared } });
    expect(set.code).toBe(0);
    expect(statSync(shared).mode & 0o7777).toBe(0o1777);
  });

  it('a setgid group folder (2775) reached through a symbolic link keeps its mode; secrets refused', async () => {
    const real = join(tempDir(), 'group');
    mkdirSync(real);
    chmodSync(real, 0o2775);
    const link = join(tempDir(), 'link');
    symlinkSync(real, link);
    const r = await runCli(['secret', 'set', '7', '-'], { env: { WXHOOKS_CONFIG_DIR: link, WX_BASE_URL: 'http://127.0.0.1:9' }, stdin: 'whsec_x' });
    expect(r.code).toBe(2);
    expect(statSync(real).mode & 0o7777).toBe(0o2775);
  });

  it('a folder of your own that others can read (0755): a warning, and the secret is stored (0600)', async () => {
    const own = join(tempDir(), 'own');
    mkdirSync(own);
    chmodSync(own, 0o755);
    const r = await runCli(['secret', 'set', '7', '-'], { env: { WXHOOKS_CONFIG_DIR: own, WX_BASE_URL: 'http://127.0.0.1:9' }, stdin: 'whsec_x' });
    expect(r.code).toBe(0);
    expect(r.stderr).toContain('can be read by other users');
    expect(statSync(join(own, 'secrets.json')).mode & 0o777).toBe(0o600);
    expect(statSync(own).mode & 0o777).toBe(0o755);
  });

  it('a folder wxhooks creates is 0700', async () => {
    const fresh = join(tempDir(), 'new', 'deeper');
    const r = await runCli(['secret', 'set', '7', '-'], { env: { WXHOOKS_CONFIG_DIR: fresh, WX_BASE_URL: 'http://127.0.0.1:9' }, stdin: 'whsec_x' });
    expect(r.code).toBe(0);
    expect(statSync(fresh).mode & 0o777).toBe(0o700);
  });
});

describe('a damaged secret store: exit 2 naming what is wrong, never its content', () => {
  it.each([
    ["a string where a base URL's entries go", '{"version":1,"secrets":{"http://127.0.0.1:9":"str"}}', 'is not an object'],
    ['a null entry', '{"version":1,"secrets":{"http://127.0.0.1:9":{"7":null}}}', 'is not an object'],
    ['a number as a secret', '{"version":1,"secrets":{"http://127.0.0.1:9":{"7":{"secret":42}}}}', 'has no secret'],
    ['no secrets object', '{"version":1}', 'no "secrets" object'],
  ])('%s', async (_name, content, says) => {
    const dir = tempDir();
    writeFileSync(join(dir, 'secrets.json'), content);
    const env = { WXHOOKS_CONFIG_DIR: dir, WX_BASE_URL: 'http://127.0.0.1:9' };
    for (const [args, stdin] of [
      [['secret', 'list'], undefined],
      [['secret', 'set', '8', '-'], 'whsec_x'],
      [['listen', '--webhook', '7', '--port', '0'], undefined],
    ] as const) {
      const r = await runInProcess([...args], { env, stdin });
      expect(r.code, args.join(' ')).toBe(2);
      expect(r.stderr).toContain(says);
      expect(r.stderr).not.toMatch(/TypeError|\n\s+at /);
    }
    expect(readFileSync(join(dir, 'secrets.json'), 'utf8')).toBe(content); // left as it was
  });

  it("a symbolic link to another file: not followed (exit 2), and that file's bytes are not quoted", async () => {
    const dir = tempDir();
    const other = join(tempDir(), 'passwd');
    writeFileSync(other, 'root:x:0:0:root:/root:/bin/bash\nsecret-token-in-a-file\n');
    symlinkSync(other, join(dir, 'secrets.json'));
    const r = await runInProcess(['secret', 'list'], { env: { WXHOOKS_CONFIG_DIR: dir } });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('secrets.json: a symbolic link, which is not followed');
    expect(r.stderr).not.toContain('root:x');
    expect(r.stderr).not.toContain('secret-token');
  });
});
