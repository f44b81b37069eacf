import { mkdir, readFile, readdir, rm, statfs, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import * as DEFAULTS from '../delivery/defaults.js';
import { StorageError } from '../errors.js';
import { fsReason, writeFileAtomic, writeFilesAtomic } from '../util/files.js';
import type { ChannelRecord, ChannelUsage, Refusal, RelayStorage, Removed, StoredDelivery } from './storage.js';

/**
 * The relay's storage in a folder (`relay serve --store file`): one folder per channel, holding its
 * record (`channel.json`, with the webhook's secret: mode 0600, the folders 0700) and one file per
 * delivery, named by its seq, arrival time and size, so that starting needs no file read but the records
 * (and the notes of refused deliveries: `<delivery>.refused`, why listen refused it). A delivery is
 * written to a temporary name and renamed (src/util/files.ts), all of a batch or none: a crash leaves
 * it whole or absent, and a failed write (a full disk) leaves nothing. With `fsync`, each file and its
 * folder are synced before the delivery is answered (a power loss loses nothing acknowledged); without,
 * the relay survives the death of its process, as `listen` does. Handing over reads (or, for the newest,
 * not even that) and acknowledging unlinks: neither writes, so a full disk still drains.
 *
 * Each file takes whole blocks of the disk, however small the delivery: `footprint` says so, and the
 * relay's byte budget (--max-bytes) counts that, not the bytes alone (a 400-byte delivery takes 4 KiB).
 */

export interface FileRelayStorageOptions {
  dir: string;
  fsync?: boolean;
  /** The bytes of deliveries (their `size`) kept in memory besides their files, so that handing them over reads no file. */
  memoryBytes?: number;
}

/*
 * The copy in memory of the newest deliveries written, up to `memoryBytes` (DEFAULTS.relayMemoryBytes): a
 * backlog within it is handed over without a file read (open, fstat, read, close: four trips to the thread
 * pool each). The files stay the truth; a delivery not copied (past the budget, or written before a
 * restart) is read from its file. Measured (BENCHMARKS.md, relay): `relay serve`'s CPU a delivery in the
 * drain of a 10,000 backlog, 77-119 µs with it against 305-595 µs without in the same hour; the storage
 * alone (bench/relay-storage.js) 39-44 µs against 164-280 µs.
 */

interface Item {
  receivedAt: number;
  size: number;
  file: string;
  /** Its headers and body, when kept in memory too. */
  copy?: { headers: [string, string][]; body: Uint8Array };
  refused?: Refusal;
}

interface Held {
  record: ChannelRecord;
  /** The deliveries kept, in seq order (they are added in that order). */
  items: Map<number, Item>;
}

const RECORD = 'channel.json';
const DELIVERY = /^(\d{16})-(\d+)-(\d+)\.dlv$/;
const REFUSED = '.refused';
/** What a file takes besides its bytes, counted into the bytes before they are rounded up to whole blocks: the length of the headers' JSON, its brackets and quotes. */
const FILE_OVERHEAD = 64;
const encoder = new TextEncoder();

const fileName = (seq: number, receivedAt: number, size: number) => `${String(seq).padStart(16, '0')}-${receivedAt}-${size}.dlv`;

/** [4-byte big-endian length of the headers' JSON][the headers' JSON][the body]. */
function encode(d: StoredDelivery): Buffer {
  const meta = encoder.encode(JSON.stringify(d.headers));
  const out = Buffer.allocUnsafe(4 + meta.length + d.body.length);
  out.writeUInt32BE(meta.length, 0);
  out.set(meta, 4);
  out.set(d.body, 4 + meta.length);
  return out;
}

function decode(raw: Buffer): { headers: [string, string][]; body: Uint8Array } {
  const length = raw.readUInt32BE(0);
  return { headers: JSON.parse(raw.subarray(4, 4 + length).toString('utf8')) as [string, string][], body: raw.subarray(4 + length) };
}

export class FileRelayStorage implements RelayStorage {
  readonly where: string;
  private readonly held = new Map<string, Held>();
  /** The `size` of the deliveries copied in memory. */
  private copied = 0;
  private readonly memoryBytes: number;
  /** The disk's block: the least a file takes. */
  private block = 4096;

  private constructor(private readonly options: FileRelayStorageOptions) {
    this.where = options.dir;
    this.memoryBytes = options.memoryBytes ?? DEFAULTS.relayMemoryBytes;
  }

  /** Forgets a delivery's copy in memory, if it had one. */
  private uncopy(item: Item): void {
    if (item.copy) this.copied -= item.size;
    item.copy = undefined;
  }

  private get root(): string {
    return join(this.options.dir, 'channels');
  }

  /** Opens the folder (creating it), and reads what it holds; half-written deliveries of a crash are removed. */
  static async open(options: FileRelayStorageOptions): Promise<FileRelayStorage> {
    const s = new FileRelayStorage(options);
    try {
      await mkdir(s.root, { recursive: true, mode: 0o700 });
      s.block = Math.max(512, (await statfs(s.root).catch(() => undefined))?.bsize ?? 4096);
      for (const name of await readdir(s.root)) {
        const dir = join(s.root, name);
        let record: ChannelRecord;
        try {
          record = JSON.parse(await readFile(join(dir, RECORD), 'utf8')) as ChannelRecord;
        } catch {
          continue; // a channel whose record was never written whole: it was never answered
        }
        const items = new Map<number, Item>();
        const found: [number, Item][] = [];
        const files = await readdir(dir);
        const notes = new Set(files.filter((f) => f.endsWith(REFUSED)));
        for (const file of files) {
          const m = DELIVERY.exec(file);
          if (m) {
            const item: Item = { receivedAt: Number(m[2]), size: Number(m[3]), file };
            if (notes.has(file + REFUSED)) {
              item.refused = await readFile(join(dir, file + REFUSED), 'utf8').then(
                (text) => JSON.parse(text) as Refusal,
                () => undefined,
              );
              if (item.refused) item.size += s.block;
            }
            found.push([Number(m[1]), item]);
          } else if (file.endsWith('.tmp')) await unlink(join(dir, file)).catch(() => undefined);
        }
        found.sort((a, b) => a[0] - b[0]);
        for (const [seq, item] of found) items.set(seq, item);
        const last = found.at(-1)?.[0] ?? 0;
        s.held.set(record.name, { record: { ...record, nextSeq: Math.max(record.nextSeq, last + 1) }, items });
      }
    } catch (err) {
      throw new StorageError(`Cannot use the relay's folder ${options.dir}: ${fsReason(err)}.`, { hint: 'Give a folder this user can write with --dir.', cause: err });
    }
    return s;
  }

  private failed(what: string, err: unknown): StorageError {
    return new StorageError(`The relay's folder ${this.options.dir}: ${what}: ${fsReason(err)}.`, { cause: err });
  }

  footprint(size: number): number {
    return Math.ceil((size + FILE_OVERHEAD) / this.block) * this.block;
  }

  async channels(): Promise<ChannelRecord[]> {
    return [...this.held.values()].map((h) => ({ ...h.record }));
  }

  async usage(): Promise<Map<string, ChannelUsage>> {
    const out = new Map<string, ChannelUsage>();
    for (const [name, h] of this.held) {
      const u: ChannelUsage = { queued: 0, refused: 0, bytes: 0 };
      for (const item of h.items.values()) {
        u.bytes += item.size;
        if (item.refused) u.refused++;
        else {
          u.queued++;
          u.oldestAt = u.oldestAt === undefined ? item.receivedAt : Math.min(u.oldestAt, item.receivedAt);
        }
      }
      out.set(name, u);
    }
    return out;
  }

  async saveChannel(channel: ChannelRecord): Promise<void> {
    const dir = join(this.root, channel.name);
    try {
      await mkdir(dir, { recursive: true, mode: 0o700 });
      await writeFileAtomic(join(dir, RECORD), JSON.stringify(channel), { mode: 0o600, sync: Boolean(this.options.fsync) });
    } catch (err) {
      throw this.failed(`the channel ${channel.name} could not be written`, err);
    }
    const h = this.held.get(channel.name);
    if (h) h.record = { ...channel, nextSeq: Math.max(channel.nextSeq, h.record.nextSeq) };
    else this.held.set(channel.name, { record: { ...channel }, items: new Map() });
  }

  async deleteChannel(name: string): Promise<Removed[]> {
    const h = this.held.get(name);
    if (!h) return [];
    try {
      await rm(join(this.root, name), { recursive: true, force: true });
    } catch (err) {
      throw this.failed(`the channel ${name} could not be deleted`, err);
    }
    this.held.delete(name);
    for (const item of h.items.values()) this.uncopy(item);
    return [...h.items].map(([seq, item]) => ({ channel: name, seq, size: item.size }));
  }

  async clear(name: string): Promise<Removed[]> {
    const h = this.held.get(name);
    if (!h) return [];
    return this.remove(
      name,
      [...h.items].filter(([, item]) => !item.refused).map(([seq]) => seq),
    );
  }

  async append(channel: string, deliveries: StoredDelivery[], nextSeq: number): Promise<void> {
    const h = this.held.get(channel);
    if (!h) throw new StorageError(`The relay has no channel ${channel}.`);
    try {
      // all or none: what is not answered 2xx must not stay, or it would be handed on besides the service's retry
      await writeFilesAtomic(
        join(this.root, channel),
        deliveries.map((d) => [fileName(d.seq, d.receivedAt, d.size), encode(d)] as const),
        { mode: 0o600, sync: Boolean(this.options.fsync) },
      );
    } catch (err) {
      throw this.failed('a delivery could not be written', err);
    }
    for (const d of deliveries) {
      const item: Item = { receivedAt: d.receivedAt, size: d.size, file: fileName(d.seq, d.receivedAt, d.size) };
      if (this.copied + d.size <= this.memoryBytes) {
        // a copy of the body: the request's chunk may be a view of a larger buffer, which it would keep
        item.copy = { headers: d.headers, body: new Uint8Array(d.body) };
        this.copied += d.size;
      }
      h.items.set(d.seq, item);
    }
    h.record.nextSeq = Math.max(h.record.nextSeq, nextSeq);
  }

  /** A delivery's headers and body: its copy in memory, or its file; undefined when it went meanwhile (acknowledged, expired). */
  private async load(channel: string, h: Held, seq: number, item: Item): Promise<{ headers: [string, string][]; body: Uint8Array } | undefined> {
    if (item.copy) return item.copy;
    try {
      return decode(await readFile(join(this.root, channel, item.file)));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT' && !h.items.has(seq)) return undefined;
      throw err;
    }
  }

  async read(channel: string, afterSeq: number, limit: number, maxBytes: number): Promise<StoredDelivery[]> {
    const h = this.held.get(channel);
    if (!h) return [];
    const picked: [number, Item][] = [];
    let bytes = 0;
    for (const [seq, item] of h.items) {
      if (seq <= afterSeq || item.refused) continue;
      if (picked.length >= limit || (picked.length && bytes + item.size > maxBytes)) break;
      picked.push([seq, item]);
      bytes += item.size;
    }
    try {
      const read = await Promise.all(
        picked.map(async ([seq, item]) => {
          const d = await this.load(channel, h, seq, item);
          return d && { seq, receivedAt: item.receivedAt, headers: d.headers, body: d.body, size: item.size };
        }),
      );
      return read.filter((d) => d !== undefined);
    } catch (err) {
      throw this.failed('a delivery could not be read', err);
    }
  }

  async remove(channel: string, seqs: readonly number[]): Promise<Removed[]> {
    const h = this.held.get(channel);
    if (!h) return [];
    const dir = join(this.root, channel);
    const removed: Removed[] = [];
    await Promise.all(
      seqs.map(async (seq) => {
        const item = h.items.get(seq);
        if (!item) return;
        try {
          await unlink(join(dir, item.file));
          if (item.refused) await unlink(join(dir, item.file + REFUSED));
        } catch (err) {
          if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw this.failed('a delivery could not be deleted', err);
        }
        h.items.delete(seq);
        this.uncopy(item);
        removed.push({ channel, seq, size: item.size });
      }),
    );
    return removed;
  }

  async expire(before: number): Promise<Removed[]> {
    const out: Removed[] = [];
    for (const [name, h] of this.held) {
      const old = [...h.items].filter(([, item]) => item.receivedAt < before && !item.refused).map(([seq]) => seq);
      if (old.length) out.push(...(await this.remove(name, old)));
    }
    return out;
  }

  async refuse(channel: string, seq: number, refusal: Refusal): Promise<number | undefined> {
    const h = this.held.get(channel);
    const item = h?.items.get(seq);
    if (!h || !item || item.refused) return undefined;
    try {
      await writeFileAtomic(join(this.root, channel, item.file + REFUSED), JSON.stringify(refusal), { mode: 0o600, sync: Boolean(this.options.fsync) });
    } catch (err) {
      throw this.failed('a refused delivery could not be noted', err);
    }
    // it waits for a person now, not for the next listen: its copy in memory is for the drain
    this.uncopy(item);
    item.refused = refusal;
    item.size += this.block;
    return this.block;
  }

  async refusedOf(channel: string): Promise<Omit<StoredDelivery, 'body'>[]> {
    const h = this.held.get(channel);
    if (!h) return [];
    const out: Omit<StoredDelivery, 'body'>[] = [];
    for (const [seq, item] of h.items) {
      if (!item.refused) continue;
      const d = await this.load(channel, h, seq, item).catch((err: unknown) => {
        throw this.failed('a refused delivery could not be read', err);
      });
      if (d) out.push({ seq, receivedAt: item.receivedAt, headers: d.headers, size: item.size, refused: item.refused });
    }
    return out;
  }

  async close(): Promise<void> {
    // every write is finished before it resolves: nothing is pending
  }
}
