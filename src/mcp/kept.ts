import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { RefusedError, UsageError } from '../errors.js';
import { History, type FullRecord, type HistorySource, type RunsView } from '../receiver/history.js';
import { fromRow, listedRow, type Listed } from '../receiver/listed.js';
import { replayFromHistory } from '../receiver/replay.js';
import { isMarked, readSavedFile, savedAsEvent, savedBody, type SavedDelivery } from '../receiver/saved.js';
import { parseBodyObject } from '../signing/json-body.js';
import type { HistoryLimits } from '../store/history-limits.js';
import type { Clock } from '../util/clock.js';
import { fsReason } from '../util/files.js';
import { replayRefused, type Attached, type Attachment, type Replayed } from './attachment.js';

/** How often a `--save-dir` folder is looked at for new files, while someone watches. */
const FOLDER_POLL_MS = 500;

/** Where a replay from a kept history goes, and what it is signed with: `--forward-to` and a secret given to `wxhooks mcp`. */
export interface KeptReplay {
  to: string;
  secret: string;
  timeoutMs: number;
  clock: Clock;
}

/**
 * A history kept elsewhere: the shared PostgreSQL store's (read only: nothing is written to it), or the
 * files of a `--save-dir` folder, read into a history in memory (by the inspector's own limits). Replay
 * only when `wxhooks mcp` was given where to (`--forward-to`) and a secret to sign with.
 */
export class KeptHistory implements Attachment {
  private watching = 0;
  private poller: NodeJS.Timeout | undefined;

  constructor(
    private readonly history: HistorySource,
    readonly about: Attached,
    private readonly replayTo: KeptReplay | undefined,
    /** A folder's: reads its new files (before each answer, and while someone watches). */
    private readonly folder?: SavedFolder | undefined,
    private readonly onClose: () => Promise<void> = async () => undefined,
  ) {}

  private refresh(): Promise<void> {
    return this.folder?.refresh() ?? Promise.resolve();
  }

  async records(): Promise<Listed[]> {
    await this.refresh();
    return (await this.history.since(0)).map((r) => fromRow(listedRow(r, r.id, r.replay_of)));
  }

  async one(id: number): Promise<{ record: FullRecord; attempts: FullRecord[] } | undefined> {
    await this.refresh();
    const record = await this.history.get(id);
    return record && { record, attempts: await this.history.attemptsOf(id) };
  }

  async search(text: string, limit: number): Promise<number[]> {
    await this.refresh();
    return this.history.search(text, limit);
  }

  async runs(): Promise<RunsView & { expect_hours: number[] | null }> {
    await this.refresh();
    return { ...(await this.history.runs()), expect_hours: null };
  }

  async replay(id: number, body?: Buffer): Promise<Replayed> {
    if (!this.replayTo) throw new RefusedError(this.about.replay_unavailable ?? 'Nowhere to replay to.', { hint: 'Start `wxhooks mcp` with --forward-to URL and --webhook ID (or --secret-env VAR).' });
    const r = await replayFromHistory(this.history, id, { ...this.replayTo, edited: body });
    if (!r.ok) throw replayRefused(id, r, `No delivery ${id} is kept in ${this.about.where}.`);
    // a history in memory keeps the replay as a record of its own, with your app's whole answer; the
    // shared store is only read, so of a replay from it, the answer's start is what there is
    const replay = this.history instanceof History ? (await this.history.since(id)).filter((x) => x.replay_of === id).at(-1) : undefined;
    const answer = replay && (await this.history.get(replay.id))?.app_answer;
    return { result: { ...r.result, ...(answer ? { answer } : {}) }, replay_id: replay?.id };
  }

  /** (A history in memory calls listeners as it adds; the shared store's streams from where its first read of records() was, so `after` is not needed.) */
  watch(listener: (record: Listed) => void): () => void {
    const stop = this.history.subscribe((row) => listener(fromRow(row)));
    if (this.folder && this.watching++ === 0) this.poller = setInterval(() => void this.refresh().catch(() => undefined), FOLDER_POLL_MS).unref();
    return () => {
      stop();
      if (this.folder && --this.watching === 0) clearInterval(this.poller);
    };
  }

  async close(): Promise<void> {
    clearInterval(this.poller);
    await this.onClose();
  }
}

/**
 * The deliveries of a `--save-dir` folder, in a history in memory (the inspector's limits: the newest
 * `rows` files at most, their bodies within `bytes`), read again for new files before each answer, and
 * every FOLDER_POLL_MS while someone watches (as a listen that is still writing there adds them).
 */
export class SavedFolder {
  readonly history: History;
  private readonly seen = new Set<string>();
  private reading: Promise<void> | undefined;

  constructor(
    readonly dir: string,
    limits: Partial<HistoryLimits>,
    /** What shows a file verified (src/receiver/saved.ts): the store's save key, and the secrets given, if any. */
    private readonly key: Buffer | undefined,
    private readonly secrets: readonly string[],
  ) {
    this.history = new History(limits);
  }

  /** Reads the files not read yet, oldest first (their names start with the time they were received). */
  refresh(): Promise<void> {
    this.reading ??= this.read().finally(() => (this.reading = undefined));
    return this.reading;
  }

  private async read(): Promise<void> {
    let names: string[];
    try {
      names = (await readdir(this.dir)).filter((n) => n.endsWith('.json') && !this.seen.has(n)).sort();
    } catch (err) {
      throw new UsageError(`Cannot read the folder "${this.dir}": ${fsReason(err)}.`, { hint: 'Give the folder `listen --save-dir` writes to.' });
    }
    // only the newest the history can keep are read; the others are passed over for good
    const skip = Math.max(0, names.length - this.history.limits.rows);
    names.slice(0, skip).forEach((n) => this.seen.add(n));
    for (const name of names.slice(skip)) {
      const file = join(this.dir, name);
      let saved: SavedDelivery;
      try {
        // the save-dir's rules: a regular file, not through a link, not over the size limit
        saved = await readSavedFile(file);
      } catch {
        continue; // being written, or not one we read: looked at next time (or never, if it stays so)
      }
      this.seen.add(name);
      const body = savedBody(saved);
      this.history.add(savedAsEvent({ file, saved, payload: parseBodyObject(body), marked: isMarked(saved, this.key) }, this.key, this.secrets), {
        headers: saved.headers,
        body,
        received: Date.parse(saved.received_at),
        ms: 0,
      });
    }
  }
}

/** The folder, read now: one that cannot be read is said at once, before the server starts (an empty one is fine: a listen may be about to write to it). */
export async function openSavedFolder(dir: string, limits: Partial<HistoryLimits>, key: Buffer | undefined, secrets: readonly string[]): Promise<SavedFolder> {
  const folder = new SavedFolder(dir, limits, key, secrets);
  await folder.refresh();
  return folder;
}
