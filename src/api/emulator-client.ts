import { UnreachableError, UsageError } from '../errors.js';
import type { HttpClient } from './http.js';

export interface PublishEvent {
  type: string;
  model?: string;
  initialization_time?: string;
  forecast_hour?: number;
  event_type?: string;
}

export interface AttemptSummary {
  webhook_id: string;
  subscription_id: string;
  trigger_id: string;
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

  /** Throws a usage error unless the base URL is a wxhooks emulator. */
  async ensureEmulator(): Promise<void> {
    let ok = false;
    try {
      const { data } = await this.http.request<{ emulator?: boolean }>('GET', '/emulator/v1/info');
      ok = data?.emulator === true;
    } catch (err) {
      if (err instanceof UnreachableError) throw err;
    }
    if (!ok) {
      throw new UsageError(`${this.http.baseUrl} is not a wxhooks emulator; \`trigger\` only publishes events on an emulator.`, {
        hint: 'Start one with `wxhooks emulator` and point --base-url (or WX_BASE_URL) at it.',
      });
    }
  }

  async publish(event: PublishEvent): Promise<PublishResult> {
    const { data } = await this.http.request<PublishResult>('POST', '/emulator/v1/events', { body: event });
    return data;
  }
}
