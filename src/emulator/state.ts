import { readFileSync } from 'node:fs';
import { UsageError } from '../errors.js';
import { generateSecret } from '../signing/sign.js';
import { fsReason, jsonProblem, writeFileAtomic } from '../util/files.js';
import { ForecastRecord, type PersistedForecasts } from './forecasts.js';

export interface EmuSubscription {
  id: string;
  type: string;
  note: string | null;
  filters: Record<string, unknown>;
  response_options: Record<string, unknown> | null;
  created_at: string;
}

export interface EmuWebhook {
  id: string;
  url: string;
  name: string | null;
  note: string | null;
  active: boolean;
  secret: string;
  created_at: string;
  updated_at: string;
  subscriptions: EmuSubscription[];
}

export interface DeliveryAttempt {
  id: number;
  webhook_id: string;
  subscription_id: string;
  trigger_id: string;
  type: string;
  test: boolean;
  attempt: number;
  url: string;
  started_at: string;
  duration_ms: number;
  outcome: 'delivered' | 'failed';
  status?: number;
  error?: string;
  /** The start of the receiver's answer. */
  response?: string;
  /** When the next attempt is due, if one is. */
  next_attempt_at?: string;
}

interface Persisted {
  version: 1;
  next_webhook_id: number;
  next_subscription_id: number;
  webhooks: EmuWebhook[];
  /** What the forecast API answers: the runs, hours, degree days and cyclones published (absent in files of older emulators). */
  forecasts?: PersistedForecasts;
}

const NOT_OURS_HINT = 'Move it aside, or start with --in-memory (a throwaway state) or --data-file FILE (a new file is created).';

function isPersisted(data: unknown): data is Persisted {
  const d = data as Partial<Persisted> | null;
  return (
    typeof d === 'object' &&
    d !== null &&
    d.version === 1 &&
    Number.isSafeInteger(d.next_webhook_id) &&
    Number.isSafeInteger(d.next_subscription_id) &&
    Array.isArray(d.webhooks) &&
    d.webhooks.every((w) => typeof w === 'object' && w !== null && typeof w.id === 'string' && Array.isArray(w.subscriptions))
  );
}

/** How long after a change the data file is written: changes in between go in the same write. */
const WRITE_DELAY_MS = 250;

/**
 * The emulator's data: in memory, or also in a file, written atomically at most every WRITE_DELAY_MS
 * after a change (a write of the whole state per create made 10,000 creates take minutes, slower with
 * each), and at once on close, so that no change it answered is lost on a clean exit.
 */
export class EmulatorState {
  webhooks: Map<string, EmuWebhook> = new Map<string, EmuWebhook>();
  deliveries: DeliveryAttempt[] = [];
  /** What the emulator published, as its forecast API answers it. */
  readonly forecasts: ForecastRecord = new ForecastRecord();
  private nextWebhookId = 1;
  private nextSubscriptionId = 1;
  private nextAttemptId = 1;
  private writing: Promise<void> = Promise.resolve();
  private timer: NodeJS.Timeout | undefined;
  /** Whether something changed since the last write began. */
  private dirty = false;
  /** How many times the data file was written. */
  writes = 0;
  static readonly MAX_DELIVERIES = 10_000;

  constructor(readonly dataFile?: string) {
    if (dataFile) this.load(dataFile);
  }

  private load(file: string): void {
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
      throw new UsageError(`Cannot read the emulator's state file "${file}": ${fsReason(err)}.`, { hint: NOT_OURS_HINT });
    }
    let data: unknown;
    try {
      data = JSON.parse(text);
    } catch (err) {
      throw new UsageError(`The emulator's state file "${file}" is ${jsonProblem(err)}; it was left untouched.`, { hint: NOT_OURS_HINT });
    }
    if (!isPersisted(data))
      throw new UsageError(`The emulator's state file "${file}" holds no emulator state (it was not written by \`wxhooks emulator\`); it was left untouched.`, { hint: NOT_OURS_HINT });
    this.nextWebhookId = data.next_webhook_id;
    this.nextSubscriptionId = data.next_subscription_id;
    for (const w of data.webhooks) this.webhooks.set(w.id, w);
    this.forecasts.load(data.forecasts);
  }

  /** Notes a change: the file (if any) is written within WRITE_DELAY_MS, with whatever else changed meanwhile. */
  changed(): void {
    if (!this.dataFile) return;
    this.dirty = true;
    this.timer ??= setTimeout(() => {
      this.timer = undefined;
      void this.persist().catch(() => undefined);
    }, WRITE_DELAY_MS);
  }

  /** Writes the file now if anything changed (one write at a time; a failed one does not stop the next). */
  persist(): Promise<void> {
    if (!this.dataFile) return Promise.resolve();
    clearTimeout(this.timer);
    this.timer = undefined;
    const file = this.dataFile;
    this.writing = this.writing
      .catch(() => undefined)
      .then(() => {
        if (!this.dirty) return;
        this.dirty = false;
        const data: Persisted = {
          version: 1,
          next_webhook_id: this.nextWebhookId,
          next_subscription_id: this.nextSubscriptionId,
          webhooks: [...this.webhooks.values()],
          forecasts: this.forecasts.toJSON(),
        };
        this.writes++;
        return writeFileAtomic(file, JSON.stringify(data, null, 2)).catch((err: unknown) => {
          this.dirty = true; // written at the next change, or on close
          throw err;
        });
      });
    return this.writing;
  }

  createWebhook(input: { url: string; name?: string | null; note?: string | null; active?: boolean }): EmuWebhook {
    const now = new Date().toISOString();
    const hook: EmuWebhook = {
      id: String(this.nextWebhookId++),
      url: input.url,
      name: input.name ?? null,
      note: input.note ?? null,
      active: input.active ?? true,
      secret: generateSecret(),
      created_at: now,
      updated_at: now,
      subscriptions: [],
    };
    this.webhooks.set(hook.id, hook);
    return hook;
  }

  addSubscription(hook: EmuWebhook, type: string, config: Partial<Pick<EmuSubscription, 'note' | 'filters' | 'response_options'>>): EmuSubscription {
    const sub: EmuSubscription = {
      id: String(this.nextSubscriptionId++),
      type,
      note: config.note ?? null,
      filters: config.filters ?? {},
      response_options: config.response_options ?? null,
      created_at: new Date().toISOString(),
    };
    hook.subscriptions.push(sub);
    hook.updated_at = sub.created_at;
    return sub;
  }

  record(attempt: Omit<DeliveryAttempt, 'id'>): DeliveryAttempt {
    const full = { id: this.nextAttemptId++, ...attempt };
    this.deliveries.push(full);
    if (this.deliveries.length > EmulatorState.MAX_DELIVERIES) this.deliveries.splice(0, this.deliveries.length - EmulatorState.MAX_DELIVERIES);
    return full;
  }
}
