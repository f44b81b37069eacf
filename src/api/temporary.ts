import type { Webhook } from './normalize.js';
import type { Service } from './service.js';

/**
 * The temporary webhooks `listen --public-url` creates: what marks one (its name and note), and which
 * of them are left over by a `listen` that no longer runs. The mark is in the webhook itself, at the
 * service, so any later `listen` on the same host can find it, whatever happened to the first.
 */
export interface TemporaryMark {
  host: string;
  pid: number;
  /** When its `listen` started, ISO 8601. */
  started: string;
}

const NOTE = /^temporary webhook of wxhooks listen: host=(\S+) pid=(\d+) started=(\S+);/;

export const temporaryName = (host: string) => `wxhooks listen on ${host}`;

export function temporaryNote(mark: TemporaryMark): string {
  return `temporary webhook of wxhooks listen: host=${mark.host} pid=${mark.pid} started=${mark.started}; deleted when that listen exits`;
}

/** The mark of a temporary webhook, or undefined for any other webhook. */
export function temporaryOf(hook: Pick<Webhook, 'name' | 'note'>): TemporaryMark | undefined {
  const m = typeof hook.note === 'string' ? NOTE.exec(hook.note) : null;
  if (!m || hook.name !== temporaryName(m[1]!)) return undefined;
  return { host: m[1]!, pid: Number(m[2]), started: m[3]! };
}

/**
 * The temporary webhooks of this host whose `listen` is no longer running (killed -9, or a machine that
 * restarted): `running(pid)` says whether a `listen` still holds one.
 */
export async function leftoverWebhooks(service: Service, host: string, running: (pid: number) => boolean): Promise<(Webhook & { mark: TemporaryMark })[]> {
  const all = await service.listAllWebhooks();
  const out: (Webhook & { mark: TemporaryMark })[] = [];
  for (const hook of all) {
    const mark = temporaryOf(hook);
    if (mark && mark.host === host && !running(mark.pid)) out.push({ ...hook, mark });
  }
  return out;
}
