import { createHmac } from 'node:crypto';
import { mkdirSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { tempDir } from '../helpers/cli.js';
import { body, nextSeq, raw, SECRET, signed } from '../helpers/hostile-listen.js';
import { post } from '../helpers/http.js';
import { startCliInProcess, type Cli } from '../helpers/process.js';

// What an attacker on the network, or a misbehaving service, can send to `listen`: each case named, with
// the answer, and the receiver still serving; `listen` in this process. (Its memory read from /proc, under
// ulimit, and a stdout nobody reads, as the built binary: test/full/hostile/listen.hostile.test.ts.)

interface Listening {
  proc: Cli;
  url: string;
  port: number;
}

async function listen(args: string[] = [], options: { env?: Record<string, string> } = {}): Promise<Listening> {
  const proc = startCliInProcess(['listen', '--port', '0', '--json', '--secret-env', 'S', ...args], { S: SECRET, ...options.env });
  const ready = await proc.waitFor<{ event?: string; url: string; port: number }>((v) => v.event === 'listening');
  return { proc, url: ready.url, port: ready.port };
}

/** A good delivery is still answered 200: the receiver keeps serving. */
async function stillServes(l: Listening): Promise<void> {
  const b = body();
  expect((await post(l.url, signed(b), b)).status).toBe(200);
}

describe('hostile input: listen', () => {
  it('a capture re-sent under a new Trigger-Id, in a layout that does not sign the Trigger-Id, is a duplicate', async () => {
    for (const layout of ['stripe', 'hex-timestamp'] as const) {
      const l = await listen(['--scheme', layout]);
      try {
        const b = Buffer.from(JSON.stringify({ type: 'forecast_hour.available', subscription_id: '1', data: {} })); // no trigger_id in the body
        const captured = signed(b, layout, 'r0');
        const first = await post(l.url, captured, b);
        expect(first.status).toBe(200);
        for (const fresh of ['r1', 'r2']) expect((await post(l.url, { ...captured, 'Trigger-Id': fresh }, b)).status).toBe(200);
        const outcomes = [await l.proc.waitFor<Record<string, unknown>>((v) => v.outcome === 'accepted')];
        await l.proc.waitFor(() => l.proc.lines.filter((x) => x.includes('"duplicate"')).length >= 2);
        expect(outcomes[0]).toMatchObject({ dedupe_key: 'hash', layout });
        const duplicates = l.proc.lines.map((x) => JSON.parse(x) as Record<string, unknown>).filter((v) => v.outcome === 'duplicate');
        expect(duplicates).toHaveLength(2);
        for (const d of duplicates) expect(d.dedupe_key).toBe('hash');
      } finally {
        await l.proc.stop();
      }
    }
  });

  it('two Webhook-Signature headers are one list, whatever their order', async () => {
    const l = await listen();
    try {
      for (const order of [0, 1]) {
        const b = body();
        const h = signed(b);
        const wrong = `v1,${Buffer.alloc(32, 1).toString('base64')}`;
        const [x, y] = order ? [h['Webhook-Signature'], wrong] : [wrong, h['Webhook-Signature']];
        const request =
          `POST / HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: ${b.length}\r\n` +
          `trigger-id: ${h['Trigger-Id']}\r\nwebhook-timestamp: ${h['Webhook-Timestamp']}\r\nwebhook-signature: ${x}\r\nwebhook-signature: ${y}\r\nconnection: close\r\n\r\n`;
        expect(await raw(l.port, Buffer.concat([Buffer.from(request), b]))).toMatch(/^HTTP\/1\.1 200/);
      }
    } finally {
      await l.proc.stop();
    }
  });

  it('Expect: 100-continue with a length over --max-body: 413 at once, without "100 Continue"', async () => {
    const l = await listen(['--max-body', '1MiB']);
    try {
      const answer = await raw(l.port, `POST / HTTP/1.1\r\nhost: x\r\nexpect: 100-continue\r\ncontent-length: ${2 * 1024 * 1024}\r\n\r\n`);
      expect(answer).toMatch(/^HTTP\/1\.1 413/);
      expect(answer).not.toContain('100 Continue');
      const event = await l.proc.waitFor<{ outcome?: string }>((v) => v.outcome === 'too_large');
      expect(event).toMatchObject({ status: 413 });
      await stillServes(l);
    } finally {
      await l.proc.stop();
    }
  });

  it('a malformed chunked body: the client gets 400, and the line says 400 (not 408)', async () => {
    const l = await listen();
    try {
      const answer = await raw(l.port, 'POST / HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n');
      expect(answer).toMatch(/^HTTP\/1\.1 400/);
      const event = await l.proc.waitFor<{ outcome?: string; status?: number }>((v) => v.outcome !== undefined);
      expect(event).toMatchObject({ outcome: 'bad_request', status: 400 });
      await stillServes(l);
    } finally {
      await l.proc.stop();
    }
  });

  it('"__proto__" in a signed body over 1 MiB sets no prototype: nothing is inherited', async () => {
    const l = await listen();
    try {
      const b = Buffer.from(
        JSON.stringify({ type: 'forecast_hour.available', trigger_id: `trg_proto_${nextSeq()}`, __proto__: { subscription_id: 'evil', webhook_id: 'evil' }, pad: 'x'.repeat(1100 * 1024) }).replace(
          '"__proto__"',
          '"__proto__"',
        ),
      );
      // JSON.stringify drops a __proto__ key given in a literal: write it into the text instead
      const text = b.toString().replace('"type"', '"__proto__":{"subscription_id":"evil","webhook_id":"evil"},"type"');
      const bytes = Buffer.from(text);
      expect((await post(l.url, signed(bytes), bytes)).status).toBe(200);
      const event = await l.proc.waitFor<Record<string, unknown>>((v) => v.outcome === 'accepted');
      expect(event.subscription_id).toBeUndefined();
      expect(event.webhook_id).toBeUndefined();
    } finally {
      await l.proc.stop();
    }
  });

  it('a re-formatted body over 64 KiB is not re-serialised to diagnose it (an unauthenticated request buys no CPU with its size)', async () => {
    const l = await listen();
    try {
      const original = body({ pad: 'y'.repeat(100 * 1024) });
      const headers = signed(original);
      const reformatted = Buffer.from(JSON.stringify(JSON.parse(original.toString()), null, 2));
      expect((await post(l.url, headers, reformatted)).status).toBe(401);
      const event = await l.proc.waitFor<{ reason?: string }>((v) => v.reason !== undefined);
      expect(event.reason).toBe('no_match');
      // and under 64 KiB the diagnosis is still made
      const small = body();
      expect((await post(l.url, signed(small), Buffer.from(JSON.stringify(JSON.parse(small.toString()), null, 2)))).status).toBe(401);
      await l.proc.waitFor<{ reason?: string }>((v) => v.reason === 'body_reformatted');
    } finally {
      await l.proc.stop();
    }
  });

  it('--save-dir: 200 deliveries at once with 134-character trigger ids make 200 files, each line naming its own', async () => {
    const saveDir = join(tempDir(), 'saved');
    mkdirSync(saveDir);
    const l = await listen(['--save-dir', saveDir]);
    try {
      const long = (i: number) => `trg_${'z'.repeat(120)}_${String(i).padStart(5, '0')}_${process.pid}`.slice(0, 134);
      const results = await Promise.all(
        Array.from({ length: 200 }, async (_, i) => {
          const b = body({ trigger_id: long(i) });
          return (await post(l.url, signed(b), b)).status;
        }),
      );
      expect(results.every((s) => s === 200)).toBe(true);
      await l.proc.waitFor(() => l.proc.lines.filter((x) => x.includes('"accepted"')).length >= 200);
      const savedTo = l.proc.lines
        .map((x) => JSON.parse(x) as { saved_to?: string })
        .filter((v) => v.saved_to)
        .map((v) => v.saved_to);
      expect(new Set(savedTo).size).toBe(200);
      expect(readdirSync(saveDir).filter((f) => f.endsWith('.json'))).toHaveLength(200);
    } finally {
      await l.proc.stop();
    }
  });

  // What the probe found holding up, kept so that it goes on holding up.
  it('held up: malformed HTTP is 400; a ../ trigger id stays inside --save-dir; a 10 KB signature header is refused', async () => {
    const saveDir = join(tempDir(), 'saved');
    const l = await listen(['--save-dir', saveDir]);
    try {
      expect(await raw(l.port, 'GARBAGE\r\n\r\n')).toMatch(/^HTTP\/1\.1 400/);
      expect(await raw(l.port, 'POST / HTTP/1.1\r\nhost: x\r\ncontent-length: nope\r\n\r\n')).toMatch(/^HTTP\/1\.1 400/);
      const b = body({ trigger_id: '../../../escape' });
      expect((await post(l.url, signed(b), b)).status).toBe(200);
      const event = await l.proc.waitFor<{ saved_to?: string }>((v) => v.saved_to !== undefined);
      expect(event.saved_to!.startsWith(saveDir)).toBe(true);
      expect(readdirSync(join(saveDir, '..'))).toEqual(['saved']);
      const c = body();
      expect((await post(l.url, { ...signed(c), 'Webhook-Signature': `v1,${'A'.repeat(10_000)}` }, c)).status).toBe(401);
      const hex = createHmac('sha256', Buffer.from(SECRET.slice(6), 'base64'))
        .update(c)
        .digest('hex');
      expect((await post(l.url, { ...signed(c), 'Webhook-Signature': `sha256=${hex}` }, c)).status).toBe(401);
      await stillServes(l);
    } finally {
      await l.proc.stop();
    }
  });
});
