import { describe, expect, it } from 'vitest';
import { ExitCode, UsageError } from '../src/errors.js';
import { SINKS, SINK_KINDS, sinkExamples } from '../src/sinks/kinds.js';
import { decodeMessage, encodeMessage, FIELDS, type FieldName } from '../src/sinks/message.js';
import { parseSinkUrl, shownSinkUrl } from '../src/sinks/sink-url.js';
import { runCli } from './helpers/cli.js';
import { BROKERS, delivery } from './helpers/sinks.js';

// What needs no broker: the registry of sinks, their URLs, and the message a sink writes and reads.

function usageError(f: () => unknown): UsageError {
  try {
    f();
  } catch (err) {
    expect(err).toBeInstanceOf(UsageError);
    expect((err as UsageError).exitCode).toBe(ExitCode.USAGE);
    return err as UsageError;
  }
  throw new Error('expected a usage error');
}

describe('sink URLs', () => {
  it('nats:// names a subject, redis:// a stream; the defaults and the settings in the query', () => {
    const n = parseSinkUrl('nats://wx:pw-secret-1@broker.internal/wxhooks.deliveries');
    expect(n).toMatchObject({
      kind: 'nats',
      host: 'broker.internal',
      port: 4222,
      username: 'wx',
      password: 'pw-secret-1',
      name: 'wxhooks.deliveries',
      dedupeMs: 86_400_000,
      keepMs: 7 * 86_400_000,
      tls: false,
    });
    expect(n.shown).toBe('nats://wx:***@broker.internal/wxhooks.deliveries');
    const r = parseSinkUrl('rediss://:pw-secret-2@cache:6380/wx%3Adeliveries?db=3&dedupe=1h&keep=2d');
    expect(r).toMatchObject({ kind: 'redis', port: 6380, password: 'pw-secret-2', name: 'wx:deliveries', settings: { db: 3 }, dedupeMs: 3_600_000, keepMs: 2 * 86_400_000, tls: true });
    expect(parseSinkUrl('nats://h/a.b?stream=MINE').settings).toEqual({ stream: 'MINE' });
    expect([n.acceptDrops, r.acceptDrops]).toEqual([false, false]);
    // a bare user of nats:// is a token: hidden too
    expect(shownSinkUrl('nats://tok-secret-3@h/a')).toBe('nats://***@h/a');
  });

  it.each([
    ['not a url', 'not a URL'],
    ['http://h/x', 'must be nats://, redis://'],
    ['nats:///subject', 'names no host'],
    ['nats://h', 'names no subject'],
    ['nats://h/a.*', 'wildcard'],
    ['nats://h/a..b', 'empty token'],
    ['redis://h', 'names no stream'],
    ['redis://h/s?stream=x', 'unknown setting "stream"'],
    ['nats://h/s?dedupe=soon', 'must be a duration'],
    ['nats://h/s?dedupe=2d&keep=1d', 'must be at least its dedupe'],
    ['nats://h/s?stream=a.b', 'not a JetStream stream name'],
    ['redis://h/s?db=first', 'database number'],
    ['redis://h/s?drops=yes', 'drops must be "accept"'],
  ])('%s: exit 2, saying what is wrong', (url, words) => {
    expect(usageError(() => parseSinkUrl(url)).message).toContain(words);
  });

  it('an error never shows the password', () => {
    const e = usageError(() => parseSinkUrl('redis://:pw-secret-4@h/s?colour=red'));
    expect(e.message).toContain('redis://:***@h/s');
    expect(e.message).not.toContain('pw-secret-4');
  });
});

describe('the message', () => {
  it('one encoder and one decoder: what was written is read back, byte for byte, whatever the ids hold', () => {
    const d = { ...delivery('trg_1'), trigger: 'trg\n%2F/ü', subscription: 'sub 1/x' };
    const m = encodeMessage(d);
    expect(m.fields.map(([name]) => name)).toEqual(FIELDS.filter((f) => f !== 'type' || d.type !== undefined));
    // every value is one line of text, so a NATS header can carry it
    for (const [, value] of m.fields) expect(value).not.toMatch(/[\r\n]/);
    const fields = new Map(m.fields);
    const back = decodeMessage((n) => fields.get(n), m.body);
    expect(back).toEqual({ ok: true, message: { ...d, key: m.key } });
    expect(m.key).toBe('sub%201%2Fx/trg%0A%252F%2F%C3%BC');
  });

  it.each<[string, (f: Map<FieldName, string>) => void, string]>([
    ['no wxhooks field', (f) => f.delete('wxhooks'), 'not a wxhooks message: it has no "wxhooks" field'],
    ['a newer format', (f) => f.set('wxhooks', '2'), 'format "2", and this wxhooks reads format 1'],
    ['a field missing', (f) => f.delete('layout'), '"layout" field is missing'],
    ['a key that does not match', (f) => f.set('key', '7/trg_other'), 'key does not match'],
    ['headers that are not an object', (f) => f.set('headers', '[1]'), 'headers are not a JSON object of strings'],
    ['an unknown source', (f) => f.set('source', 'guess'), 'not body, header or hash'],
    ['a timestamp that is not a number', (f) => f.set('timestamp', '1e9'), 'not a whole number'],
  ])('refused with a reason: %s', (_name, change, reason) => {
    const m = encodeMessage(delivery('trg_2'));
    const fields = new Map(m.fields);
    change(fields);
    const d = decodeMessage((n) => fields.get(n), m.body);
    expect(d.ok).toBe(false);
    expect(!d.ok && d.reason).toContain(reason);
  });

  it('refused: no body', () => {
    const fields = new Map(encodeMessage(delivery('trg_3')).fields);
    expect(decodeMessage((n) => fields.get(n), undefined)).toEqual({ ok: false, reason: 'it has no body' });
  });
});

describe('the registry of sinks', () => {
  it('each kind: its schemes parse to it, with its default port, and a path it names for the tests and the guide', () => {
    expect(SINK_KINDS).toEqual(expect.arrayContaining(['nats', 'redis']));
    for (const kind of SINKS) {
      for (const [scheme, { tls }] of Object.entries(kind.schemes)) {
        const t = parseSinkUrl(`${scheme}://h/${kind.pathFor('label 1')}`);
        expect(t).toMatchObject({ kind: kind.kind, port: kind.defaultPort, tls });
        expect(kind.pathProblem(t.name)).toBeUndefined();
      }
      expect(kind.pathProblem('')?.problem).toMatch(/names no/);
    }
  });

  it('?drops=accept is read for every kind; refuse is the default', () => {
    for (const kind of SINKS) {
      const scheme = Object.keys(kind.schemes)[0]!;
      expect(parseSinkUrl(`${scheme}://h/${kind.pathFor('x')}?drops=accept`).acceptDrops).toBe(true);
      expect(parseSinkUrl(`${scheme}://h/${kind.pathFor('x')}?drops=refuse`).acceptDrops).toBe(false);
    }
  });

  it("listen --sink's help, deliveries list --sink's help, the scheme error and the tests' broker table are read from it", async () => {
    const listen = await runCli(['listen', '--help']);
    const deliveries = await runCli(['deliveries', 'list', '--help']);
    const wrong = await runCli(['deliveries', 'list', '--sink', 'ftp://h/t']);
    expect(wrong.code).toBe(ExitCode.USAGE);
    const flat = (text: string) => text.replace(/\s+/g, ' ');
    for (const kind of SINKS) {
      expect(flat(listen.stdout)).toContain(`${kind.label} (${kind.example})`);
      expect(flat(deliveries.stdout)).toContain(kind.example);
      for (const scheme of Object.keys(kind.schemes)) expect(wrong.stderr).toContain(`${scheme}://`);
    }
    expect(flat(listen.stdout)).toContain('?drops=accept');
    expect(Object.keys(BROKERS)).toEqual(SINK_KINDS);
    expect(sinkExamples()).toBe(SINKS.map((k) => k.example).join(' or '));
  });
});
