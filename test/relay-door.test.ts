import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MemoryStore } from '../src/delivery/memory-store.js';
import { startRelayDoor, type RunningRelayDoor } from '../src/receiver/relay-door.js';
import type { ReceiverEvent } from '../src/receiver/event.js';
import { FileRelayStorage } from '../src/relay/file-storage.js';
import { startRelayServer, type RunningRelay } from '../src/relay/node-host.js';
import { generateSecret } from '../src/signing/sign.js';
import { Verifier } from '../src/signing/verify.js';
import { tempDir } from './helpers/cli.js';
import { manualClock } from './helpers/clock.js';
import { delivery, listener, send } from './helpers/relay.js';

// listen's relay door is the core's door (src/delivery/door.ts) over what the relay hands over: each
// delivery's body is charged to --max-inflight as it is received (the relay's window, --max-inflight's
// bytes, keeps what it sends within it), and one larger than the whole budget still goes when nothing
// else is in flight (else it would be handed over again for ever). In this process: `relay serve`'s host
// over a folder, and the door's own client.

const TOKEN = 'relay-door-token';
const SECRET = generateSecret();
const CHANNEL = 'door';

describe("listen's relay door: --max-inflight", () => {
  let relay: RunningRelay;
  let storage: FileRelayStorage;
  beforeAll(async () => {
    storage = await FileRelayStorage.open({ dir: tempDir('wxhooks-relay-door-') });
    relay = await startRelayServer({ host: '127.0.0.1', port: 0, storage, token: TOKEN });
    const l = listener({ url: relay.url, token: TOKEN, channel: CHANNEL, secrets: [SECRET] });
    await l.client.start();
    await l.client.close();
  });
  afterAll(async () => {
    await relay?.close();
    await storage?.close();
  });

  it('three deliveries each larger than the whole budget: each goes alone, and all three arrive, once', async () => {
    const bodies = ['trg_door_1', 'trg_door_2', 'trg_door_3'].map((t) => delivery(SECRET, t, { pad: 2000 }));
    for (const d of bodies) expect((await send(`${relay.url}/in/${CHANNEL}`, 'POST', d.headers, d.body)).status).toBe(200);

    const clock = manualClock(Date.now());
    const events: ReceiverEvent[] = [];
    const waiters = new Set<() => void>();
    const until = (what: string, predicate: () => boolean) =>
      new Promise<void>((resolve, reject) => {
        const guard = setTimeout(() => reject(new Error(`timed out waiting for ${what}: ${JSON.stringify(events.map((e) => e.outcome))}`)), 20_000);
        const check = () => {
          if (!predicate()) return;
          clearTimeout(guard);
          waiters.delete(check);
          resolve();
        };
        waiters.add(check);
        check();
      });
    let door: RunningRelayDoor | undefined;
    try {
      door = await startRelayDoor({
        relay: relay.url,
        token: TOKEN,
        channel: CHANNEL,
        secrets: [SECRET],
        tolerance: 300,
        scheme: 'auto',
        temporary: false,
        verifier: new Verifier({ secret: SECRET }),
        store: new MemoryStore(),
        // less than one body: each goes only when it is the only one in flight
        maxInflight: 1000,
        concurrency: 3,
        clock,
        onEvent(event) {
          events.push(event);
          for (const w of [...waiters]) w();
        },
        onLink: () => undefined,
      });
      const running = door;
      await door.ready;
      const accepted = () => events.filter((e) => e.outcome === 'accepted').length;
      await until('the three', () => accepted() === 3);
      expect(running.refusedOverBudget).toBe(0);
      expect(events.map((e) => [e.outcome, e.trigger_id]).sort()).toEqual([
        ['accepted', 'trg_door_1'],
        ['accepted', 'trg_door_2'],
        ['accepted', 'trg_door_3'],
      ]);
    } finally {
      await door?.close();
    }
  });
});
