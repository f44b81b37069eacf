import { AuthError, UnreachableError, UsageError } from '../errors.js';
import type { HttpClient } from './http.js';

export interface PublishEvent {
  type: string;
  model?: string;
  initialization_time?: string;
  forecast_hour?: number;
  event_type?: string;
}

/** One delivery attempt, as the emulator reports it (`GET /emulator/v1/deliveries`, and a publish's first attempts). */
export interface AttemptSummary {
  webhook_id: string;
  subscription_id: string;
  trigger_id: string;
  /** The subscription type (absent from a publish's `pending` attempts). */
  type?: string;
  /** A ping's test delivery (never retried). */
  test?: boolean;
  started_at?: string;
  attempt: number;
  /** `pending`: still waiting for the receiver when the emulator answered. */
  outcome: 'delivered' | 'failed' | 'pending';
  status?: number;
  error?: string;
  duration_ms?: number;
  url: string;
  next_attempt_at?: string;
  response?: string;
}

export interface PublishResult {
  event: Required<Pick<PublishEvent, 'type' | 'model' | 'initialization_time'>> & PublishEvent;
  trigger_id: string | null;
  notifications: number;
  deliveries: AttemptSummary[];
}

/** The emulator's own endpoints, under /emulator/v1. */
export class EmulatorClient {
  constructor(private readonly http: HttpClient) {}

  /**
   * Throws a usage error unless the base URL is a wxhooks emulator; an emulator (or anything) that
   * refuses the key is an AuthError (exit 3), as for every other command, not "no emulator".
   */
  async ensureEmulator(command = 'trigger', does = 'only publishes events on an emulator'): Promise<void> {
    let ok = false;
    try {
      const { data } = await this.http.request<{ emulator?: boolean }>('GET', '/emulator/v1/info');
      ok = data?.emulator === true;
    } catch (err) {
      if (err instanceof UnreachableError || err instanceof AuthError) throw err;
    }
    if (!ok) {
      throw new UsageError(`${this.http.baseUrl} is not a wxhooks emulator; \`${command}\` ${does}.`, {
        hint: 'Start one with `wxhooks emulator` and point --base-url (or WX_BASE_URL) at it.',
      });
    }
  }

  /** Every delivery attempt the emulator made (the last 10,000), oldest first; filtered by webhook or trigger. */
  async deliveries(filter: { webhook?: string; trigger?: string } = {}): Promise<AttemptSummary[]> {
    const { data } = await this.http.request<{ deliveries: AttemptSummary[] }>('GET', '/emulator/v1/deliveries', { query: { webhook_id: filter.webhook, trigger_id: filter.trigger } });
    return data.deliveries;
  }

  async publish(event: PublishEvent): Promise<PublishResult> {
    const { data } = await this.http.request<PublishResult>('POST', '/emulator/v1/events', { body: event });
    return data;
  }
}
