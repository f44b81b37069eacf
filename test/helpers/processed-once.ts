import { type Agent, request } from 'node:http';
import { expect } from 'vitest';
import { signed } from './receiver.js';
import { sendJson, startServer, type TestServer } from './server.js';

// What the processed-once tests of both tiers share (test/processed-once.test.ts, and the full disk and
// closed pipe of test/full/processed-once.test.ts): an app that counts, a delivery, and the rule itself.

/** An app that records every delivery forwarded to it, and answers 200 (or holds its answers until told). */
export async function countingApp(): Promise<TestServer & { forwarded: string[]; hold(): void; release(): void }> {
  const forwarded: string[] = [];
  let held: (() => void)[] | undefined;
  const app = await startServer((req, res) => {
    forwarded.push((req.json as { trigger_id: string }).trigger_id);
    if (held) held.push(() => sendJson(res, 200, { ok: true }));
    else sendJson(res, 200, { ok: true });
  });
  return Object.assign(app, {
    forwarded,
    hold: () => (held = []),
    release: () => {
      const waiting = held ?? [];
      held = undefined;
      waiting.forEach((answer) => answer());
    },
  });
}

/** POSTs a signed delivery; the status, or 0 when the connection failed. */
export function deliver(url: string, agent: Agent, trigger: string, timestamp?: number): Promise<number> {
  const { headers, body } = signed(trigger, { timestamp });
  const u = new URL(url);
  return new Promise((resolve) => {
    const req = request({ host: u.hostname, port: u.port, path: '/', method: 'POST', headers, agent }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', () => resolve(0));
    req.end(body);
  });
}

/** The rule: every delivery forwarded at most once, and every one acknowledged (2xx) forwarded. */
export function processedOnce(forwarded: string[], acknowledged: Iterable<string>): void {
  const seen = new Map<string, number>();
  for (const t of forwarded) seen.set(t, (seen.get(t) ?? 0) + 1);
  expect(
    [...seen].filter(([, n]) => n > 1),
    'forwarded twice',
  ).toEqual([]);
  expect(
    [...acknowledged].filter((t) => !seen.has(t)),
    'acknowledged, never forwarded',
  ).toEqual([]);
}
