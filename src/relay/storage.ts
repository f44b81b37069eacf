/**
 * Where a relay keeps its channels and the deliveries waiting in them: the one interface the relay's
 * logic (src/relay/relay.ts) talks to, runtime-neutral. Three implement it: a folder of files
 * (file-storage.ts) and PostgreSQL (postgres-storage.ts) for the Node host, and a Durable Object's own
 * SQLite (do-storage.ts) for the Worker.
 *
 * The rules every implementation keeps:
 * - `append` resolves only once the deliveries are where a crash of the process cannot lose them (written
 *   with write(2), committed, or past a Durable Object's output gate): the relay answers 2xx after it.
 * - A delivery leaves only by `remove` (it was acknowledged, or its refusal dropped), `expire` (older than
 *   the relay keeps) or `deleteChannel`.
 * - A refused delivery (`refuse`: the listen it was handed to could not verify it) is kept apart: `read`
 *   and `expire` pass it by, `usage` counts it apart; only `remove` and `deleteChannel` take it.
 * - Within a channel, deliveries are read back in the order of their `seq`.
 * - Handing over (`read`), acknowledging (`remove`) and opening a channel unchanged need no write: a full
 *   disk still lets the backlog drain, which is what frees it.
 */

/** A channel, as kept. Its secret is the webhook's: it never leaves the relay. */
export interface ChannelRecord {
  name: string;
  /** The webhook's secret (several during a rotation). */
  secrets: string[];
  /** A channel of one `listen` session, deleted when it ends. */
  temporary: boolean;
  createdAt: number;
  /** When a client last opened or left it (ms since the epoch): a channel unused for as long as deliveries are kept is forgotten. */
  lastSeenAt: number;
  /** The seq the next delivery gets (never reused while the channel exists). */
  nextSeq: number;
  /** The tolerance of the listen that opened it last, in seconds (the relay's own when it is wider or unset). */
  tolerance?: number;
  /** The layout that listen verifies with (`auto` when unset). */
  scheme?: string;
  /** Secrets replaced lately, and when: each verifies, at listen, what the relay received before then, for a while. */
  retired?: { secret: string; at: number }[];
}

/** Why a delivery was refused by the listen it was handed to, and when. */
export interface Refusal {
  at: number;
  /** The verifier's reason (`no_match`, `timestamp_out_of_window`, ...). */
  reason: string;
  message: string;
}

/** What a channel holds. */
export interface ChannelUsage {
  /** Deliveries waiting to be handed over (the refused ones not among them). */
  queued: number;
  /** Refused deliveries kept. */
  refused: number;
  /** Every byte the channel's deliveries take, refused ones included. */
  bytes: number;
  /** When the oldest delivery waiting arrived (ms since the epoch). */
  oldestAt?: number;
}

/** A delivery as the relay received it: its exact bytes and headers. */
export interface StoredDelivery {
  seq: number;
  /** When the relay received it (ms since the epoch). */
  receivedAt: number;
  headers: [string, string][];
  body: Uint8Array;
  /** What it counts against the byte budget: what it takes in the store (its body and headers, or a file's whole blocks). */
  size: number;
  /** Set when the listen it was handed to refused it. */
  refused?: Refusal;
}

/** A delivery that left (acknowledged, expired or deleted with its channel): how many bytes it freed. */
export interface Removed {
  channel: string;
  seq: number;
  size: number;
}

export interface RelayStorage {
  /** Where it is, for messages: a folder, or a database without its password. */
  readonly where: string;
  /** Every channel kept. */
  channels(): Promise<ChannelRecord[]>;
  /** What each channel holds (channels holding nothing may be left out). */
  usage(): Promise<Map<string, ChannelUsage>>;
  /** Creates or updates a channel. */
  saveChannel(channel: ChannelRecord): Promise<void>;
  /** Deletes a channel and every delivery in it; resolves with what they were. */
  deleteChannel(name: string): Promise<Removed[]>;
  /** Deletes a channel's waiting deliveries (not its refused ones); resolves with what they were. */
  clear(name: string): Promise<Removed[]>;
  /** Stores deliveries of one channel (their seqs from its `nextSeq` on), and its `nextSeq` after them. */
  append(channel: string, deliveries: StoredDelivery[], nextSeq: number): Promise<void>;
  /**
   * The waiting deliveries after `afterSeq`, in order: at most `limit`, and no more body bytes than
   * `maxBytes` (but always the first, whatever its size).
   */
  read(channel: string, afterSeq: number, limit: number, maxBytes: number): Promise<StoredDelivery[]>;
  /** Deletes these deliveries of a channel (acknowledged); resolves with those that were there. */
  remove(channel: string, seqs: readonly number[]): Promise<Removed[]>;
  /** Deletes every delivery received before `before` (ms since the epoch), the refused ones kept; resolves with what they were. */
  expire(before: number): Promise<Removed[]>;
  /** Marks a waiting delivery refused (a write); resolves with the bytes it takes more now (a file store's note of why), or undefined when it is not there. */
  refuse(channel: string, seq: number, refusal: Refusal): Promise<number | undefined>;
  /** A channel's refused deliveries, in order: their headers and why, not their bodies. */
  refusedOf(channel: string): Promise<Omit<StoredDelivery, 'body'>[]>;
  /** What a delivery of `size` bytes (body and headers) takes in this store: the budget counts that. */
  footprint?(size: number): number;
  close(): Promise<void>;
}
