import { execFileSync, spawn } from 'node:child_process';
import { chmodSync, chownSync, copyFileSync, cpSync, mkdirSync, mkdtempSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signDelivery } from '../../../src/signing/index.js';
import { freePort } from '../../../scripts/harness.js';
import { BIN, cleanEnv, runCli, spawnCli, tempDir } from '../../helpers/cli.js';
import { post } from '../../helpers/http.js';
import { startCli, type Running } from '../../helpers/process.js';
import { sendJson, startServer, type TestServer } from '../../helpers/server.js';

// Another user on the same machine, and the files they can put in a store folder (#32.3, #32.10). The
// tests run as root: the other user's files are made real with chown to nobody (uid 65534); where being
// root changes the rule (root's own files are trusted), the CLI is also run as a non-root user.

const NOBODY = 65534;
/** A second non-root user, for the runs as nobody: another user's uid need not have a name. */
const SOMEONE = 65533;
const BASE = 'http://127.0.0.1:9';
const OURS = 'whsec_' + Buffer.alloc(32, 1).toString('base64');
const THEIRS = 'whsec_' + Buffer.alloc(32, 66).toString('base64');
const secretsOf = (secret: string) => JSON.stringify({ version: 1, secrets: { [BASE]: { 7: { secret, created_at: '2026-11-24T00:00:00.000Z' } } } });

/** A file another user made: written, then given to them (with the mode they would give it). */
function plant(file: string, content: string, uid = NOBODY, mode = 0o644): void {
  writeFileSync(file, content);
  chmodSync(file, mode);
  chownSync(file, uid, uid);
}

/** A folder of the given mode (and owner). */
function folder(path: string, mode: number, uid = 0): string {
  mkdirSync(path, { recursive: true });
  chmodSync(path, mode);
  chownSync(path, uid, uid);
  return path;
}

/** Whether a long-running command started (its line came) or exited first, and with what. */
async function startsOrExits(run: Running, event: string): Promise<{ started: Record<string, unknown> } | { code: number | null }> {
  try {
    return { started: await run.waitFor<Record<string, unknown>>((v) => v.event === event) };
  } catch {
    return { code: await run.exited };
  }
}

describe('#32.3 the secret store: who owns the folder and the file, and who can write to them, before every read', () => {
  it('a folder others can write to but not read (0733): another user replaced secrets.json with their secret for webhook 7; listen refuses to start (exit 2) and nothing they signed is accepted', async () => {
    const store = folder(join(tempDir(), 'store'), 0o733);
    plant(join(store, 'secrets.json'), secretsOf(THEIRS));
    const show = await runCli(['secret', 'show', '7'], { env: { WXHOOKS_CONFIG_DIR: store, WX_BASE_URL: BASE } });
    expect(show.code).toBe(2);
    expect(show.stdout).not.toContain(THEIRS);
    expect(show.stderr).toContain(`Secrets are not stored in ${store}: other users can write to it (mode 733)`);
    expect(show.stderr).toContain(`chmod 700 ${store}`);

    const listen = startCli(['listen', '--webhook', '7', '--port', '0', '--json'], { WXHOOKS_CONFIG_DIR: store, WX_BASE_URL: BASE });
    const first = await startsOrExits(listen, 'listening');
    if ('started' in first) {
      // what the probe saw: a delivery signed with the other user's secret, accepted
      const body = Buffer.from(JSON.stringify({ type: 'forecast_hour.available', trigger_id: 'trg_theirs', subscription_id: '1' }));
      const answer = await post(first.started.url as string, signDelivery({ secret: THEIRS, body, triggerId: 'trg_theirs' }), body);
      await listen.stop();
      expect.fail(`listen started with another user's secrets.json, and answered ${answer.status} to a delivery signed with their secret`);
    }
    expect(first.code).toBe(2);
    expect(listen.stderr()).toContain('other users can write to it');
  });

  it('a folder that belongs to another user (0700, theirs): refused, for reading as for writing (exit 2)', async () => {
    const store = folder(join(tempDir(), 'theirs'), 0o700, NOBODY);
    plant(join(store, 'secrets.json'), secretsOf(THEIRS), NOBODY, 0o600);
    for (const [args, stdin] of [
      [['secret', 'show', '7'], undefined],
      [['secret', 'list'], undefined],
      [['secret', 'set', '8', '-'], OURS],
    ] as const) {
      const r = await runCli([...args], { env: { WXHOOKS_CONFIG_DIR: store, WX_BASE_URL: BASE }, stdin });
      expect(r.code, args.join(' ')).toBe(2);
      expect(r.stderr).toContain('belongs to another user (uid 65534)');
      expect(r.stdout).not.toContain(THEIRS);
    }
  });

  it('a symbolic link planted at secrets.json, to a file another user owns: not followed (O_NOFOLLOW), exit 2', async () => {
    const store = folder(join(tempDir(), 'store'), 0o700);
    const elsewhere = folder(join(tempDir(), 'elsewhere'), 0o755, NOBODY);
    plant(join(elsewhere, 'secrets.json'), secretsOf(THEIRS));
    symlinkSync(join(elsewhere, 'secrets.json'), join(store, 'secrets.json'));
    const r = await runCli(['secret', 'show', '7'], { env: { WXHOOKS_CONFIG_DIR: store, WX_BASE_URL: BASE } });
    expect(r.code).toBe(2);
    expect(r.stdout).not.toContain(THEIRS);
    expect(r.stderr).toContain(`Not reading the secret store ${join(store, 'secrets.json')}: a symbolic link, which is not followed.`);
  });

  it('a secrets.json of your own that others can write to is refused; one they can read is used, with a warning that says how to fix it', async () => {
    const store = folder(join(tempDir(), 'store'), 0o700);
    plant(join(store, 'secrets.json'), secretsOf(OURS), 0, 0o666);
    const writable = await runCli(['secret', 'show', '7'], { env: { WXHOOKS_CONFIG_DIR: store, WX_BASE_URL: BASE } });
    expect(writable.code).toBe(2);
    expect(writable.stderr).toContain('other users can write to it (mode 666)');
    chmodSync(join(store, 'secrets.json'), 0o644);
    const readable = await runCli(['secret', 'show', '7'], { env: { WXHOOKS_CONFIG_DIR: store, WX_BASE_URL: BASE } });
    expect(readable.code).toBe(0);
    expect(readable.stdout.trim()).toBe(OURS);
    expect(readable.stderr).toContain(`warning: the secret store ${join(store, 'secrets.json')} can be read by other users (mode 644): chmod 600 ${join(store, 'secrets.json')}`);
  });
});

describe('#32.10 every file read from the store folder: the inspector token, settings.json', () => {
  let attacker: TestServer;
  beforeAll(async () => {
    attacker = await startServer((_req, res) => sendJson(res, 200, { webhooks: [], total: 0 }));
  });
  afterAll(() => attacker.close());

  it("a planted inspector token (WXHOOKS_CONFIG_DIR on a shared 1777 folder) is refused (exit 2), never the session's token", async () => {
    const shared = folder(join(tempDir(), 'shared'), 0o1777);
    plant(join(shared, 'inspector-token.json'), JSON.stringify({ value: 'planted-by-another-user' }));
    const listen = startCli(['listen', '--secret-env', 'S', '--port', '0', '--json', '--inspect', `127.0.0.1:${await freePort()}`], { S: OURS, WXHOOKS_CONFIG_DIR: shared });
    const first = await startsOrExits(listen, 'inspector');
    if ('started' in first) await listen.stop();
    expect('started' in first ? first.started.url : '').not.toContain('planted-by-another-user');
    expect(first).toEqual({ code: 2 });
    expect(listen.stderr()).toContain(`Not reading the kept value ${join(shared, 'inspector-token.json')}: it belongs to another user (uid 65534), so wxhooks did not write it.`);
    expect(listen.stderr()).toContain(`rm ${join(shared, 'inspector-token.json')}`);
  });

  it("planted processed pairs (a shared 1777 folder): another user's pairs file, one others can write, or a link, is refused (exit 2): its pairs would make real deliveries duplicates, never processed", async () => {
    const pairs = (dir: string) => join(dir, 'processed-pairs.ndjson');
    const planted = JSON.stringify({ t: 'trg_1', s: '1', at: Date.now() }) + '\n';
    const theirs = folder(join(tempDir(), 'theirs'), 0o1777);
    plant(pairs(theirs), planted, NOBODY, 0o666);
    const ownButOpen = folder(join(tempDir(), 'open'), 0o700);
    plant(pairs(ownButOpen), planted, 0, 0o666);
    const linked = folder(join(tempDir(), 'linked'), 0o700);
    symlinkSync('/dev/null', pairs(linked));
    for (const [dir, why] of [
      [theirs, 'it belongs to another user (uid 65534), so wxhooks did not write it'],
      [ownButOpen, 'other users can write to it (mode 666)'],
      [linked, 'it is a symbolic link'],
    ] as const) {
      const r = await runCli(['listen', '--secret-env', 'S', '--port', '0', '--exit-after', '1'], { env: { S: OURS, WXHOOKS_CONFIG_DIR: dir } });
      expect([dir, r.code]).toEqual([dir, 2]);
      expect(r.stderr).toContain(pairs(dir));
      expect(r.stderr).toContain(why);
    }
  });

  it("a planted settings.json whose base-url is another user's server: refused (exit 2), and the API key is not sent there", async () => {
    const shared = folder(join(tempDir(), 'shared'), 0o1777);
    plant(join(shared, 'settings.json'), JSON.stringify({ 'base-url': attacker.url }));
    const before = attacker.requests.length;
    const r = await runCli(['webhook', 'list'], { env: { WXHOOKS_CONFIG_DIR: shared, WX_API_KEY: 'the-users-key' } });
    expect(attacker.requests.slice(before).map((q) => q.headers.authorization)).toEqual([]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(`Not reading the settings file ${join(shared, 'settings.json')}: it belongs to another user (uid 65534)`);
    // the user's own settings in the same shared (sticky) folder are used
    rmSync(join(shared, 'settings.json'));
    expect((await runCli(['config', 'set', 'base-url', attacker.url], { env: { WXHOOKS_CONFIG_DIR: shared } })).code).toBe(0);
    const own = await runCli(['webhook', 'list', '--json'], { env: { WXHOOKS_CONFIG_DIR: shared, WX_API_KEY: 'the-users-key' } });
    expect(own.code, own.stderr).toBe(0);
    expect(attacker.requests.length).toBe(before + 1);
  });

  it("a store folder others can write to without the sticky bit (0733, 0777), or that is another user's: nothing is read from it (exit 2)", async () => {
    for (const [mode, uid, says] of [
      [0o733, 0, 'Other users can write to the store folder'],
      [0o777, 0, 'Other users can write to the store folder'],
      [0o755, NOBODY, 'belongs to another user (uid 65534)'],
    ] as const) {
      const store = folder(join(tempDir(), 'store'), mode, uid);
      plant(join(store, 'settings.json'), JSON.stringify({ 'base-url': attacker.url }), 0, 0o644); // even a file of root's
      const before = attacker.requests.length;
      for (const args of [
        ['webhook', 'list'],
        ['config', 'get', 'base-url'],
        ['config', 'set', 'base-url', BASE],
      ]) {
        const r = await runCli(args, { env: { WXHOOKS_CONFIG_DIR: store, WX_API_KEY: 'the-users-key' } });
        expect(r.code, `${args.join(' ')} in a ${mode.toString(8)} folder of uid ${uid}`).toBe(2);
        expect(r.stderr).toContain(says);
      }
      expect(attacker.requests.length).toBe(before);
    }
  });

  it('a FIFO at settings.json does not hang a command: refused (exit 2), saying what it is', async () => {
    const store = folder(join(tempDir(), 'store'), 0o700);
    execFileSync('mkfifo', [join(store, 'settings.json')]);
    const r = await spawnCli(['webhook', 'list'], { env: { WXHOOKS_CONFIG_DIR: store, WX_API_KEY: 'k' }, timeoutMs: 15_000 });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('a FIFO (a named pipe), not a regular file');
  });
});

describe("as a user who is not root: their own files and root's are trusted, another user's are not", () => {
  let base: string;
  let cli: { node: string; bin: string };
  beforeAll(() => {
    base = mkdtempSync(join(tmpdir(), 'wxhooks-nobody-')); // outside the run's 0700 folder, which nobody cannot enter
    chmodSync(base, 0o711);
    cli = reachableCli(base);
  });
  afterAll(() => rmSync(base, { recursive: true, force: true }));

  /** The built CLI, run as nobody (from a copy nobody can reach). */
  function asNobody(args: string[], env: Record<string, string>): Promise<{ code: number | null; stdout: string; stderr: string }> {
    return new Promise((resolve, reject) => {
      const child = spawn(cli.node, [cli.bin, ...args], { uid: NOBODY, gid: NOBODY, env: cleanEnv({ HOME: base, ...env }), stdio: ['ignore', 'pipe', 'pipe'] });
      let stdout = '';
      let stderr = '';
      child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
      child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
      const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
      child.on('error', reject);
      child.on('close', (code) => {
        clearTimeout(timer);
        resolve({ code, stdout, stderr });
      });
    });
  }

  // (0644, so that the user can open it at all: what decides is who owns it)
  it.each([
    ['their own', NOBODY, 0, OURS],
    ["root's", 0, 0, OURS],
    ["another user's", SOMEONE, 2, undefined],
  ] as const)('a secrets.json of %s, in a folder of their own', async (_name, owner, code, shown) => {
    const store = folder(join(base, `store-${owner}`), 0o700, NOBODY);
    plant(join(store, 'secrets.json'), secretsOf(owner === SOMEONE ? THEIRS : OURS), owner, 0o644);
    const r = await asNobody(['secret', 'show', '7'], { WXHOOKS_CONFIG_DIR: store, WX_BASE_URL: BASE });
    expect(r.code, r.stderr).toBe(code);
    if (shown) expect(r.stdout.trim()).toBe(shown);
    else {
      expect(r.stdout).not.toContain(THEIRS);
      expect(r.stderr).toContain(`belongs to another user (uid ${SOMEONE})`);
    }
  });

  it("a folder of another user's that they let everyone into: refused; one of their own: a new secret is kept 0600", async () => {
    const theirs = folder(join(base, 'theirs'), 0o777, SOMEONE);
    const refused = await asNobody(['secret', 'set', '7', '-'], { WXHOOKS_CONFIG_DIR: theirs, WX_BASE_URL: BASE });
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain(`belongs to another user (uid ${SOMEONE})`);
    const own = join(base, 'own', 'store');
    folder(join(base, 'own'), 0o700, NOBODY);
    const set = await new Promise<number | null>((resolve) => {
      const child = spawn(cli.node, [cli.bin, 'secret', 'set', '7', '-'], {
        uid: NOBODY,
        gid: NOBODY,
        env: cleanEnv({ HOME: base, WXHOOKS_CONFIG_DIR: own, WX_BASE_URL: BASE }),
        stdio: ['pipe', 'ignore', 'ignore'],
      });
      child.on('close', resolve);
      child.stdin.end(OURS);
    });
    expect(set).toBe(0);
    expect(statSync(join(own, 'secrets.json')).mode & 0o777).toBe(0o600);
    expect(statSync(join(own, 'secrets.json')).uid).toBe(NOBODY);
    const shown = await asNobody(['secret', 'show', '7'], { WXHOOKS_CONFIG_DIR: own, WX_BASE_URL: BASE });
    expect(shown.stdout.trim()).toBe(OURS);
    expect(shown.stderr).toBe('');
  });
});

/**
 * A copy of the built CLI that another user can run: the clone may be in a folder only its owner can
 * enter (a home folder of mode 0700, `mktemp -d`), and so may Node itself. The CLI's bundle (dist/bin,
 * with package.json for its module type) is copied into `base`; Node too, when a folder above it is
 * closed to others.
 */
function reachableCli(base: string): { node: string; bin: string } {
  const root = join(dirname(BIN), '..');
  const copy = join(base, 'wxhooks');
  for (const part of ['package.json', 'bin', join('dist', 'bin')]) cpSync(join(root, part), join(copy, part), { recursive: true });
  // readable by all, folders enterable: the copy is the user's own files, as an install would be
  execFileSync('chmod', ['-R', 'a+rX', copy]);
  const closed = (dir: string): boolean => dir !== dirname(dir) && ((statSync(dir).mode & 0o001) === 0 || closed(dirname(dir)));
  let node = process.execPath;
  if (closed(dirname(node))) {
    node = join(base, 'node');
    copyFileSync(process.execPath, node);
    chmodSync(node, 0o755);
  }
  return { node, bin: join(copy, 'bin', 'wxhooks.js') };
}
