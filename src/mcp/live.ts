import { AuthError, NotFoundError, RefusedError, UnreachableError, UsageError } from '../errors.js';
import { verified } from '../receiver/event.js';
import type { ForwardResult } from '../receiver/forward.js';
import type { FullRecord, RunsView } from '../receiver/history.js';
import { fromRow, type Listed } from '../receiver/listed.js';
import { REPLAY_REFUSALS } from '../receiver/replay.js';
import { forwardsAnywhere } from '../receiver/routes.js';
import { isTimeout, networkReason } from '../util/net.js';
import { replayRefused, type Attached, type Attachment, type Replayed } from './attachment.js';
import type { RunFigures } from '../observe/figures.js';

/** How long a stream to the inspector waits before it connects again, when the listen went away. */
const RECONNECT_MS = 1000;

/**
 * A running `listen --inspect`, through its inspector's own API (src/receiver/inspector.ts), with the
 * session's token in `X-Wxhooks-Token`: the deliveries it keeps, their runs, and replay, which the
 * listen signs itself (its secret never leaves it). New deliveries come by the page's event stream.
 */
export class LiveListen implements Attachment {
  private readonly listeners = new Set<(record: Listed) => void>();
  private streaming: Promise<void> | undefined;
  private abort: AbortController | undefined;
  private session: string | undefined;
  private closed = false;

  constructor(
    /** The inspector's address, without its token, ending in `/`. */
    private base: string,
    private readonly token: string,
    public about: Attached,
    private readonly timeoutMs: number,
    /** Where a listen found through the store folder is now, when it went away (restarted elsewhere): the newest one running that answers. */
    private readonly findAgain?: () => Promise<{ inspector: string; about: Attached } | undefined>,
  ) {}

  /**
   * One request to the inspector's API: its status and its JSON. A token refused is a credentials error;
   * a listen away, unreachable, unless one found again through the store folder answers in its place.
   */
  private async api<T>(method: 'GET' | 'POST', path: string, body?: unknown, again = true): Promise<{ status: number; data: T }> {
    let res: Response;
    try {
      res = await fetch(new URL(path, this.base), {
        method,
        headers: { 'x-wxhooks-token': this.token, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(this.timeoutMs),
      });
    } catch (err) {
      if (again && !isTimeout(err) && (await this.followed())) return this.api(method, path, body, false);
      throw new UnreachableError(`The listen whose inspector is at ${this.about.where} does not answer: ${networkReason(err, this.timeoutMs)}.`, {
        hint: this.findAgain
          ? 'Is it still running? Start `wxhooks listen --inspect` again (with the same store folder): this server finds it by itself.'
          : 'Is it still running? Start it again, and give its new address with --listen.',
        cause: err,
      });
    }
    // it answers: whatever it was waited for is here
    if (this.about.waiting !== undefined) {
      const { waiting: _, ...rest } = this.about;
      this.about = rest;
    }
    const text = await res.text();
    let data: unknown;
    try {
      data = JSON.parse(text);
    } catch {
      data = { error: text.slice(0, 200) };
    }
    if (res.status === 421) {
      throw new UsageError(`The inspector at ${this.about.where} answers only at its own address (421).`, { hint: 'Give --listen the address the listen printed (or localhost), with its port.' });
    }
    if (res.status === 401 || res.status === 403) {
      throw new AuthError(`The inspector at ${this.about.where} refused this server (${res.status}): ${(data as { error?: string }).error ?? ''}`, {
        status: res.status,
        hint: 'The token is read from the store folder (inspector-token.json): run this server with the same WXHOOKS_CONFIG_DIR as the listen, or give --listen with the link the listen printed.',
      });
    }
    return { status: res.status, data: data as T };
  }

  /** Whether the listen, gone away, was found again elsewhere through the store folder (and is followed from now on). */
  private async followed(): Promise<boolean> {
    const moved = await this.findAgain?.().catch(() => undefined);
    if (!moved || moved.inspector === this.base) return false;
    this.base = moved.inspector;
    this.about = moved.about;
    return true;
  }

  /** Whether the listen answers now, when it did not (status asks before it answers). */
  async lookAgain(): Promise<void> {
    if (this.about.waiting !== undefined) await this.check().catch(() => undefined);
  }

  /** Checks that the inspector answers, and takes this server's token. */
  async check(): Promise<void> {
    await this.api('GET', 'api/runs');
  }

  async records(): Promise<Listed[]> {
    return (await this.api<{ records: Listed[] }>('GET', 'api/deliveries')).data.records;
  }

  async one(id: number): Promise<{ record: FullRecord; attempts: FullRecord[] } | undefined> {
    const { status, data } = await this.api<{ record: FullRecord; attempts: FullRecord[] }>('GET', `api/deliveries/${id}`);
    return status === 200 ? data : undefined;
  }

  async search(text: string, limit: number): Promise<number[]> {
    return (await this.api<{ ids: number[] }>('GET', `api/search?q=${encodeURIComponent(text)}`)).data.ids.slice(0, limit);
  }

  async runs(): Promise<RunsView & { expect_hours: number[] | null }> {
    return (await this.api<RunsView & { expect_hours: number[] | null }>('GET', 'api/runs')).data;
  }

  async figures(): Promise<RunFigures> {
    const { status, data } = await this.api<RunFigures & { error?: string }>('GET', 'api/metrics');
    if (status !== 200) throw new RefusedError(`The listen at ${this.about.where} keeps no figures: ${data.error ?? status}.`, { status, hint: 'A listen of this version keeps them with --inspect.' });
    return data;
  }

  async replay(id: number, body?: Buffer): Promise<Replayed> {
    const found = await this.one(id);
    if (!found)
      throw new NotFoundError(`No delivery ${id} is kept by the listen at ${this.about.where}.`, { hint: 'list_deliveries shows what is kept (the listen keeps its last --history deliveries).' });
    // replay's rule, before asking the listen (whose answer to it is a 409 like any other refusal)
    if (!verified(found.record)) throw replayRefused(id, REPLAY_REFUSALS.notVerified(found.record), '');
    if (this.about.listen && !forwardsAnywhere(this.about.listen))
      throw new RefusedError(this.about.replay_unavailable ?? 'This listen forwards nowhere.', { hint: 'Start listen with --forward-to URL.' });
    const before = (await this.records()).at(-1)?.id ?? 0;
    const { status, data } = await this.api<(ForwardResult & { trigger_id: string }) | { error: string }>(
      'POST',
      `api/deliveries/${id}/replay`,
      body === undefined ? undefined : { body: body.toString('utf8') },
    );
    if (status === 404) throw new NotFoundError(`No delivery ${id} is kept by the listen any more.`);
    if (status !== 200 || 'error' in data) throw new RefusedError(`The listen did not replay delivery ${id}: ${'error' in data ? data.error : status}.`, { status });
    // the listen keeps the replay as a record of its own, with your app's whole answer
    const replay = (await this.records()).filter((r) => r.id > before && r.replay_of === id).at(-1);
    const kept = replay && (await this.one(replay.id));
    return { result: { ...data, ...(kept?.record.app_answer ? { answer: kept.record.app_answer } : {}) }, replay_id: replay?.id };
  }

  watch(listener: (record: Listed) => void, after?: number): () => void {
    this.listeners.add(listener);
    this.streaming ??= this.stream(after).finally(() => (this.streaming = undefined));
    return () => {
      this.listeners.delete(listener);
      if (!this.listeners.size) this.abort?.abort();
    };
  }

  /** The inspector's event stream, read while someone watches; connected again when the listen went away (and came back). */
  private async stream(from: number | undefined): Promise<void> {
    let after = from ?? (await this.records().catch(() => [])).at(-1)?.id ?? 0;
    while (this.listeners.size && !this.closed) {
      this.abort = new AbortController();
      try {
        const res = await fetch(new URL(`api/events?after=${after}`, this.base), { headers: { 'x-wxhooks-token': this.token }, signal: this.abort.signal });
        if (res.ok && res.body) {
          const decoder = new TextDecoder();
          let buffer = '';
          const reader = res.body.getReader();
          for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read()) {
            buffer += decoder.decode(chunk.value, { stream: true });
            for (let end = buffer.indexOf('\n\n'); end >= 0; end = buffer.indexOf('\n\n')) {
              after = this.message(buffer.slice(0, end), after);
              buffer = buffer.slice(end + 2);
            }
          }
        }
      } catch {
        // the listen went away, or no one watches any more
      }
      if (!this.listeners.size || this.closed) break;
      if (await this.followed()) continue; // restarted elsewhere: its ids begin again (its `ready` says so)
      await new Promise((resolve) => setTimeout(resolve, RECONNECT_MS).unref());
    }
  }

  /** One message of the stream: `ready` (what was missed, and the listen's session) or `deliveries` (a row a line). Returns the last id seen. */
  private message(block: string, after: number): number {
    let event = 'message';
    const data: string[] = [];
    for (const line of block.split('\n')) {
      if (line.startsWith('event: ')) event = line.slice(7);
      else if (line.startsWith('data: ')) data.push(line.slice(6));
    }
    let rows: unknown[][] = [];
    if (event === 'ready') {
      const ready = JSON.parse(data.join('\n')) as { session: string; rows: unknown[][] };
      // a restarted listen numbers its deliveries from 1 again
      if (this.session !== undefined && ready.session !== this.session) after = 0;
      this.session = ready.session;
      rows = ready.rows;
    } else if (event === 'deliveries') rows = data.map((d) => JSON.parse(d) as unknown[]);
    for (const row of rows) {
      const record = fromRow(row);
      if (record.id <= after) continue;
      after = record.id;
      for (const listen of this.listeners) listen(record);
    }
    return after;
  }

  async close(): Promise<void> {
    this.closed = true;
    this.abort?.abort();
    await this.streaming;
  }
}
