import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runListen } from '../src/commands/listen.js';
import { runTrigger } from '../src/commands/trigger.js';
import { runVerify } from '../src/commands/verify.js';
import { runWebhookList } from '../src/commands/webhook.js';
import { tempDir } from './helpers/cli.js';
import { parsed, runInProcess, testContext } from './helpers/context.js';
import { startService, type FakeService } from './helpers/service.js';

// Commands run in-process here: parsing (argv in, the options run receives out), and run functions
// against real local servers. The built binary, signals and the wire are the end-to-end tests' part.

describe('help', () => {
  it('every text pre-rendered at build time (dist/bin/help.json) is what commander renders now', async () => {
    const texts = JSON.parse(readFileSync(new URL('../dist/bin/help.json', import.meta.url), 'utf8')) as Record<string, string>;
    const keys = Object.keys(texts);
    expect(keys.length).toBeGreaterThan(30);
    for (const key of keys) {
      const words = key ? key.split(' ') : [];
      const r = await runInProcess(['--no-color', ...words, '--help']); // an option first: commander renders it
      expect(r.code, key).toBe(0);
      expect(r.stdout, key).toBe(texts[key]);
    }
  });
});

describe('parsing: argv in, typed options out', () => {
  it('listen: numbers, durations in ms and sizes in bytes, defaults included', async () => {
    const { run, args } = await parsed(['listen', '--port', '0', '--tolerance', '60', '--max-body', '1MiB', '--dedupe-ttl', '1h', '--fsync']);
    expect(run).toBe(runListen);
    expect(args[0]).toMatchObject({
      port: 0,
      host: '127.0.0.1',
      path: '/',
      scheme: 'auto',
      tolerance: 60,
      maxBody: 1024 * 1024,
      maxInflight: 256 * 1024 * 1024,
      dedupeTtl: 3_600_000,
      forwardTimeout: 30_000,
      readTimeout: 10_000,
      fsync: true,
    });
  });

  it('verify: --at as milliseconds, the same --tolerance limits as listen', async () => {
    const { run, args } = await parsed(['verify', 'saved.json', '--secret-env', 'S', '--at', '2026-11-21T06:04:00Z']);
    expect(run).toBe(runVerify);
    expect(args).toEqual(['saved.json', expect.objectContaining({ at: Date.parse('2026-11-21T06:04:00Z'), tolerance: 300, scheme: 'auto', secretEnv: 'S' })]);
    for (const command of ['verify', 'listen']) {
      const r = await runInProcess([command, '--secret-env', 'S', '--tolerance', '0']);
      expect(r.code, command).toBe(2);
      expect(r.stderr, command).toContain('--tolerance must be a whole number from 1 to 31622400, not "0"');
    }
  });

  it('trigger run: forecast hours from a range, holes and repeats', async () => {
    const { run, args } = await parsed(['trigger', 'run', '--hours', '0-72/6,78-96/6', '--skip-hours', '12,18', '--repeat-hours', '6', '--shuffle']);
    expect(run).toBe(runTrigger);
    expect(args[1]).toMatchObject({ hours: [0, 6, 12, 18, 24, 30, 36, 42, 48, 54, 60, 66, 72, 78, 84, 90, 96], skipHours: [12, 18], repeatHours: [6], shuffle: true, interval: 0 });
  });

  it('webhook list: page numbers as numbers', async () => {
    const { run, args } = await parsed(['webhook', 'list', '--page', '2', '--page-size', '50']);
    expect(run).toBe(runWebhookList);
    expect(args[0]).toMatchObject({ page: 2, pageSize: 50 });
  });

  it('the global --timeout as milliseconds', async () => {
    const { args } = await parsed(['--timeout', '2m', 'webhook', 'list']);
    expect(args[0]).toBeDefined();
    const r = await runInProcess(['--timeout', '0', 'webhook', 'list']);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('--timeout must be more than 0');
  });
});

describe('bad input: a clear message, exit 2, and nothing sent', () => {
  let svc: FakeService;
  beforeAll(async () => {
    svc = await startService('live', tempDir());
  });
  afterAll(() => svc.stop());

  it.each([
    [['webhook', 'create', '--url', '/relative/path'], '--url is not an absolute URL'],
    [['webhook', 'create', '--url', 'ftp://example.com/'], 'must be an http or https URL'],
    [['webhook', 'create', '--url', 'https://example.com/', '--subscribe', 'forecast_hour.available:hours=24:00'], '"24:00" is not an hour of the day'],
    [['webhook', 'create', '--url', 'https://example.com/', '--subscribe', 'forecast_hour.available:hours=7'], '"7" is not an hour of the day'],
    [['webhook', 'create', '--url', 'https://example.com/', '--subscribe', 'forecast_hour.available:hours=12:60'], '"12:60" is not an hour of the day'],
    [['webhook', 'create', '--url', 'https://example.com/', '--subscribe', 'degree_days.available', '--subscribe', 'degree_days.available:model=x'], 'appears twice'],
    [['webhook', 'create', '--url', 'https://example.com/', '--subscribe', 'forecast_hour.available:colour=blue'], 'unknown key "colour"'],
    [['webhook', 'create'], 'A webhook needs a URL'],
    [['webhook', 'get', '../all'], 'The webhook id "../all" cannot contain'],
    [['webhook', 'get', '42/subscriptions'], 'cannot contain'],
    [['webhook', 'get', '42?secret=x'], 'cannot contain'],
    [['webhook', 'get', '42#x'], 'cannot contain'],
    [['webhook', 'get', '4 2'], 'cannot contain'],
    [['webhook', 'get', ''], 'The webhook id "" is empty'],
    [['webhook', 'delete', '..', '--yes'], 'cannot contain'],
    [['subscription', 'add', '1', 'forecast_hour.available', '--hours', '25:00'], '"25:00" is not an hour of the day'],
    [['subscription', 'add', '1', 'forecast_hour.available', '--response-option', 'a=b'], '--response-option needs --response TYPE'],
    [['subscription', 'update', '1', '2'], 'Nothing to update'],
    [['subscription', 'update', '1', '2', '--clear-filters', '--model', 'x'], '--clear-filters cannot be given with filter flags'],
    [['subscription', 'remove', '1', '2/../3', '--yes'], 'The subscription id "2/../3" cannot contain'],
    [['ping', '1', 'a b'], 'The subscription id "a b" cannot contain'],
    [['webhook', 'list', '--page-size', '101'], '--page-size must be a whole number from 1 to 100'],
    [['webhook', 'list', '--page', '0'], '--page must be a whole number from 1'],
    [['webhook', 'list', '--active', 'maybe'], "argument 'maybe' is invalid"],
    [['auth', 'status', '--bogus'], "unknown option '--bogus'"],
    [['frobnicate'], 'unknown command'],
    [['auth', 'status', '--auth', 'digest'], 'bearer'],
    [['auth', 'status', '--timeout', 'soon'], '--timeout must be a duration'],
    [['auth', 'status', '--timeout', '0'], '--timeout must be more than 0'],
    [['listen', '--secret-env', 'S', '--read-timeout', '0s'], '--read-timeout must be more than 0'],
    [['listen', '--secret-env', 'S', '--forward-to', 'http://127.0.0.1:9/', '--forward-timeout', '0ms'], '--forward-timeout must be more than 0'],
    [['listen', '--secret-env', 'S', '--forward-to', 'not a url'], '--forward-to is not an absolute URL'],
    [['listen', '--secret-env', 'S', '--max-body', 'lots'], '--max-body must be a size'],
    [['listen', '--secret-env', 'S', '--port', '70000'], '--port must be a whole number from 0 to 65535'],
    [['listen', '--secret-env', 'S', '--respond-status', '99'], '--respond-status must be a whole number from 200 to 599'],
    [['listen', '--secret-env', 'S', '--within', '1m'], '--within goes with --until'],
    [['listen', '--secret-env', 'S', '--scheme', 'md5'], "argument 'md5' is invalid"],
    [['listen', '--secret-env', 'NOT SET'], '--secret-env takes the NAME'],
    [['listen', '--port', '0', '--secret-env', 'S', '--inspect', 'nowhere:port'], '--inspect takes [HOST:]PORT'],
    [['listen', '--port', '0', '--secret-env', 'S', '--inspect', '0.0.0.0:0'], '--inspect on 0.0.0.0 would show every delivery'],
    // refused before the temporary webhook is created (the table checks that no request was made)
    [['listen', '--port', '0', '--public-url', 'https://tunnel.example/', '--inspect', '0.0.0.0:0'], '--inspect on 0.0.0.0 would show every delivery'],
    [['emulator', '--port', '0', '--attempt-timeout', '0'], '--attempt-timeout must be more than 0'],
    [['emulator', '--retry-delays', '1s,2s,3s,4s'], 'at most 3 delays'],
    [['trigger', 'run', '--hours', '12-6'], '--hours: "12-6" is reversed'],
    [['trigger', 'run', '--hours', '0-24/0'], '--hours: "0-24/0" has a step of 0'],
    [['trigger', 'run', '--hours', '0-400/6'], '--hours: "0-400/6" goes past hour 384'],
    [['trigger', 'run', '--hours', '0,,6'], '--hours: "" is empty'],
    [['trigger', 'run', '--init-time', 'yesterday'], '--init-time must be an ISO 8601 time'],
    [['trigger', 'forecast_hour.available', '--hours', '0-6'], '--hours, --skip-hours, --repeat-hours, --shuffle and --interval are for `trigger run`'],
    [['send', '--to', 'http://127.0.0.1:9/', '--secret-env', 'S', '--timestamp', 'now'], '--timestamp must be a whole number'],
    [['verify', '--secret-env', 'S', '--at', 'noon'], '--at must be an ISO 8601 time'],
  ])('%j', async (args, says) => {
    const before = svc.requests.length;
    const r = await runInProcess(args, { env: { ...svc.env, S: 'whsec_c2VjcmV0' } });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(says);
    expect(r.stderr).not.toMatch(/\n\s+at /);
    expect(svc.requests.length).toBe(before);
  });

  it('an unknown shell is exit 2', async () => {
    const bad = await runInProcess(['completion', 'powershell']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('bash, zsh, fish');
  });

  it('an unreadable or non-object --body', async () => {
    const dir = tempDir();
    writeFileSync(join(dir, 'arr.json'), '[1,2]');
    writeFileSync(join(dir, 'bad.json'), '{nope');
    const before = svc.requests.length;
    for (const [body, says] of [
      [join(dir, 'missing.json'), 'it does not exist (ENOENT)'],
      [join(dir, 'arr.json'), '--body must hold a JSON object'],
      [join(dir, 'bad.json'), 'is not valid JSON at byte 1'],
    ]) {
      const r = await runInProcess(['webhook', 'create', '--body', body!], { env: svc.env });
      expect(r.code, body).toBe(2);
      expect(r.stderr).toContain(says);
    }
    expect(svc.requests.length).toBe(before);
  });

  it('the base URL: none set names the flag, the variable, the setting and the emulator; a malformed one is refused', async () => {
    const none = await runInProcess(['auth', 'status'], { env: { WX_API_KEY: 'k' } });
    expect(none.code).toBe(2);
    for (const word of ['--base-url', 'WX_BASE_URL', 'config set base-url', 'wxhooks emulator']) expect(none.stderr).toContain(word);
    for (const bad of ['not a url', 'ftp://example.com', '127.0.0.1:8788']) {
      const r = await runInProcess(['auth', 'status', '--base-url', bad], { env: { WX_API_KEY: 'k' } });
      expect(r.code, bad).toBe(2);
      expect(r.stderr).toContain('--base-url');
    }
  });
});

describe('run functions, in-process, against a real local service', () => {
  let svc: FakeService;
  beforeAll(async () => {
    svc = await startService('live', tempDir());
  });
  afterAll(() => svc.stop());

  it('runWebhookList: a table on a terminal, tab-separated when piped, one document with --json', async () => {
    const created = await runInProcess(['webhook', 'create', '--url', 'https://example.com/in-process', '--name', 'in\u001b]0;owned\u0007process', '--subscribe', 'degree_days.available'], {
      env: svc.env,
    });
    expect(created.code).toBe(0);
    const tty = testContext({ env: svc.env, tty: true });
    await runWebhookList(tty, { url: 'https://example.com/in-process' });
    expect(tty.stdout.text).toMatch(/^ID\s+URL\s+NAME\s+ACTIVE\s+SUBSCRIPTIONS\n/);
    // the name's escape sequence is shown, not obeyed
    expect(tty.stdout.text).toContain('in\\x1b]0;owned\\x07process');
    expect(tty.stdout.text).not.toContain('\u001b]');
    const piped = testContext({ env: svc.env });
    await runWebhookList(piped, { url: 'https://example.com/in-process' });
    expect(piped.stdout.text.split('\n')[1]!.split('\t')).toHaveLength(5);
    const json = testContext({ env: svc.env, json: true });
    await runWebhookList(json, { url: 'https://example.com/in-process' });
    expect(JSON.parse(json.stdout.text)).toMatchObject({ webhooks: [{ url: 'https://example.com/in-process', name: 'in\u001b]0;owned\u0007process' }] });
  });
});
