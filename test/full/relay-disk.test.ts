import { randomBytes } from 'node:crypto';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { FileRelayStorage } from '../../src/relay/file-storage.js';
import { startRelayServer, type RunningRelay } from '../../src/relay/node-host.js';
import { generateSecret } from '../../src/signing/sign.js';
import { smallDisk, type SmallDisk } from '../helpers/disk.js';
import { delivery, listener, send } from '../helpers/relay.js';

// #41.5: `relay serve --store file` on a disk that fills up. Writes that fail are answered 503 and leave
// nothing behind; handing over, acknowledging and opening a channel as it is need no write, so a listen
// drains the backlog, which is what frees the disk; after a restart too. A small tmpfs of its own
// (test/helpers/disk.ts), the relay in this process.

const TOKEN = `relay-token-${randomBytes(12).toString('hex')}`;
const SECRET = generateSecret();

/** The files in a channel's folder: its deliveries, its record, and any temporary file left. */
function files(dir: string, channel: string): string[] {
  return readdirSync(join(dir, 'channels', channel));
}

describe('the relay on a full disk (#41.5)', () => {
  let disk: SmallDisk | undefined;
  let running: RunningRelay | undefined;
  let storage: FileRelayStorage | undefined;
  afterEach(async () => {
    await running?.close();
    await storage?.close();
    disk?.unmount();
    disk = running = storage = undefined;
  });

  const start = async (dir: string) => {
    storage = await FileRelayStorage.open({ dir });
    running = await startRelayServer({ host: '127.0.0.1', port: 0, storage, token: TOKEN });
    return running.url;
  };

  it('what fails to be written is answered 503 and leaves nothing (no .tmp, no delivery); the backlog still drains, before and after a restart, and frees the disk', async () => {
    disk = smallDisk(2048);
    let url = await start(disk.dir);
    const made = listener({ url, token: TOKEN, channel: 'full', secrets: [SECRET] });
    await made.client.start();
    await made.client.close();
    const backlog: string[] = [];
    for (let i = 0; i < 40; i++) {
      const d = delivery(SECRET, `trg_before_full_${i}`, { pad: 1000 });
      expect((await send(`${url}/in/full`, 'POST', d.headers, d.body)).status).toBe(200);
      backlog.push(`trg_before_full_${i}`);
    }
    disk.fill();
    // the service's deliveries now: each one answered 503, and nothing of it kept
    for (let i = 0; i < 30; i++) {
      const d = delivery(SECRET, `trg_while_full_${i}`, { pad: 3000 });
      const a = await send(`${url}/in/full`, 'POST', d.headers, d.body);
      expect(a.status).toBe(503);
      expect(a.headers['retry-after']).toBeDefined();
    }
    const kept = files(disk.dir, 'full');
    expect(kept.filter((f) => f.endsWith('.tmp'))).toEqual([]);
    expect(kept.filter((f) => f.endsWith('.dlv'))).toHaveLength(backlog.length);

    // a restart on the full disk: the channel and its backlog are read back, and nothing needs writing to open it
    await running!.close();
    await storage!.close();
    url = await start(disk.dir);
    const l = listener({ url, channel: 'full', secrets: [SECRET] });
    await l.client.start();
    await l.until(() => l.got.length === backlog.length, 'the backlog, on a full disk');
    expect(l.triggers()).toEqual(backlog);
    for (let i = 0; files(disk.dir, 'full').some((f) => f.endsWith('.dlv')); i++) {
      if (i > 500) throw new Error('the acknowledged deliveries were not deleted');
      await new Promise((r) => setTimeout(r, 10));
    }
    // what they took is free again: a new delivery is stored
    const after = delivery(SECRET, 'trg_after_drain', { pad: 1000 });
    expect((await send(`${url}/in/full`, 'POST', after.headers, after.body)).status).toBe(200);
    await l.until(() => l.triggers().includes('trg_after_drain'), 'the new one');
    await l.client.close();
  }, 60_000);
});
