import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll } from 'vitest';

// What the hostile cases against the emulator of both tiers share (test/hostile/emulator.hostile.test.ts,
// in this process; test/full/hostile/emulator.hostile.test.ts, its memory measured): the key, a call to
// its API, a receiver that never ends its answer, and the servers a file closes at its end. Each file
// starts the emulator its own way.

export const KEY = 'hostile_test_key_0123456789abcdef';

export const api = (url: string, path: string, init: { method?: string; body?: unknown; auth?: string } = {}) =>
  fetch(`${url}${path}`, {
    method: init.method ?? 'GET',
    headers: { authorization: init.auth ?? `Bearer ${KEY}`, 'content-type': 'application/json' },
    body: init.body === undefined ? undefined : typeof init.body === 'string' ? init.body : JSON.stringify(init.body),
  });

/** A receiver that answers 200 and then streams its answer without end, until the client goes away. */
export async function endlessReceiver(): Promise<{ url: string; server: Server; closedByClient: () => number }> {
  let closed = 0;
  const server = createServer((req, res) => {
    req.resume();
    res.writeHead(200, { 'content-type': 'text/plain' });
    const chunk = Buffer.alloc(64 * 1024, 0x7a);
    const pump = () => {
      while (res.write(chunk));
    };
    res.on('drain', pump);
    res.on('close', () => closed++);
    pump();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/`, server, closedByClient: () => closed };
}

/** The servers a test file starts and leaves to the end of the file: closed after all its tests. Call at the top of the file. */
export function serversClosedAfterAll(): Server[] {
  const servers: Server[] = [];
  afterAll(async () => {
    for (const s of servers) {
      s.closeAllConnections();
      await new Promise((r) => s.close(r));
    }
  });
  return servers;
}
