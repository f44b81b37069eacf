import { readFileSync } from 'node:fs';
import { WxError } from '../errors.js';
import type { Webhook } from './normalize.js';
import { createWebhookBody } from './requests.js';
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

/** Whether a `wxhooks listen` still runs as this process id (on Linux it must be one; elsewhere, any live process counts). */
export function listenRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
  try {
    const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
    return cmdline.includes('wxhooks') && cmdline.includes('listen');
  } catch {
    return true;
  }
}

/** What happens to the temporary webhook and the ones left over, for the command to show. */
export type TemporaryEvent =
  | { event: 'webhook_created'; webhook_id: string; url: string; subscriptions: { id: string; type: string }[]; temporary: true }
  | { event: 'webhook_deleted'; webhook_id: string }
  | { event: 'webhook_not_deleted'; webhook_id: string; reason: string; delete: string }
  | { event: 'leftover'; webhook_id: string; pid: number; started: string; delete: string }
  | { event: 'leftover_deleted'; webhook_id: string; pid: number; started: string };

/** The temporary webhook a `listen --public-url` holds, and how to let it go. */
export interface Temporary {
  hook: Webhook;
  service: Service;
  /** Deletes it; reports what happened (or what to run by hand). Never rejects. */
  remove(): Promise<void>;
}

export interface TemporaryOptions {
  /** Where the service is to deliver: the public URL, with listen's path. */
  url: string;
  subscribe: string[];
  host: string;
  pid: number;
  /** When this listen started, ISO 8601. */
  started: string;
  /** Delete the leftovers of this host (else only report them). */
  clean: boolean;
  report(event: TemporaryEvent): void;
}

/**
 * Creates the temporary webhook, named after this host, its note saying it is temporary with this
 * process's id and start time; then the temporary webhooks of this host that no running listen holds
 * are reported, or deleted with `clean`. A webhook created without a secret is deleted at once.
 */
export async function createTemporary(service: Service, o: TemporaryOptions): Promise<Temporary> {
  const { body } = createWebhookBody(undefined, {
    url: o.url,
    name: temporaryName(o.host),
    note: temporaryNote({ host: o.host, pid: o.pid, started: o.started }),
    subscribe: o.subscribe,
  });
  const hook = await service.createWebhook(body);
  if (!hook.secret) {
    await service.deleteWebhook(hook.id).catch(() => undefined);
    throw new WxError(`The service created webhook ${hook.id} but returned no signing secret, so its deliveries could not be verified; it was deleted.`);
  }
  o.report({ event: 'webhook_created', webhook_id: hook.id, url: hook.url, subscriptions: hook.subscriptions.map((s) => ({ id: s.id, type: s.type })), temporary: true });
  const temporary: Temporary = {
    hook,
    service,
    async remove() {
      try {
        await service.deleteWebhook(hook.id);
        o.report({ event: 'webhook_deleted', webhook_id: hook.id });
      } catch (err) {
        o.report({ event: 'webhook_not_deleted', webhook_id: hook.id, reason: (err as Error).message, delete: `wxhooks webhook delete ${hook.id} --yes` });
      }
    },
  };
  // the ones left by a listen that was killed (this one's own is held: it runs)
  try {
    for (const left of await leftoverWebhooks(service, o.host, listenRunning)) {
      if (o.clean) {
        await service.deleteWebhook(left.id);
        o.report({ event: 'leftover_deleted', webhook_id: left.id, pid: left.mark.pid, started: left.mark.started });
      } else {
        o.report({ event: 'leftover', webhook_id: left.id, pid: left.mark.pid, started: left.mark.started, delete: `wxhooks webhook delete ${left.id} --yes` });
      }
    }
  } catch (err) {
    await temporary.remove();
    throw err;
  }
  return temporary;
}
