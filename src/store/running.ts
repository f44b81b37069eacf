import { rmSync } from 'node:fs';
import { readdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { writeFileAtomic } from '../util/files.js';
import { ensurePrivateDir } from './paths.js';
import { readPrivateFile } from './private-file.js';

/**
 * A `wxhooks listen` running on this machine, as it records itself in the store folder (a file of its own
 * under running/, for as long as it runs): so that `doctor` checks through the listen that holds a port,
 * a second listen names the one in its way, and `wxhooks mcp` finds a listen's inspector. Never the
 * inspector's token (kept apart, inspector-token.json), nor a secret.
 */
export interface RunningListen {
  pid: number;
  host: string;
  port: number;
  /** The receiver's URL. */
  receiver: string;
  /** The inspector's address, without its token: null until it runs (and without --inspect). */
  inspector: string | null;
  /** Where it forwards every type without a route of its own (`--forward-to URL`). */
  forward_to: string | null;
  /** The URL of each type routed (`--forward-to TYPE=URL`); absent in the records of listens before routes. */
  forward_routes?: Record<string, string>;
  /** The webhook whose secret it verifies with (--webhook, or its temporary one), when it has one. */
  webhook_id: string | null;
  base_url: string | null;
  /** When it started (ISO 8601). */
  started: string;
}

/** A record written: changed as the listen starts more (its inspector), removed when it stops. */
export interface Announced {
  update(patch: Partial<RunningListen>): Promise<void>;
  remove(): Promise<void>;
}

const FOLDER = 'running';
const fileOf = (dir: string, pid: number) => join(dir, FOLDER, `listen-${pid}.json`);

/**
 * Records this listen in the store folder until remove() (or the process's exit, a second Ctrl-C
 * included). Under kill -9 it stays, and readers pass over it (its pid is dead). Never throws: a record
 * that cannot be written costs only being found (`mcp --listen URL`, `doctor --port` still work).
 */
export async function announceListen(dir: string, record: RunningListen): Promise<Announced> {
  const file = fileOf(dir, record.pid);
  let current = record;
  const write = () => writeFileAtomic(file, `${JSON.stringify(current)}\n`);
  try {
    ensurePrivateDir(join(dir, FOLDER));
    await write();
  } catch {
    return { update: async () => undefined, remove: async () => undefined };
  }
  const forget = () => rmSync(file, { force: true });
  process.once('exit', forget);
  let removed = false;
  return {
    async update(patch) {
      if (removed) return;
      current = { ...current, ...patch };
      await write().catch(() => undefined);
    },
    async remove() {
      removed = true;
      process.off('exit', forget);
      await rm(file, { force: true }).catch(() => undefined);
    },
  };
}

/** Whether a process of that id runs (another user's counts: it exists, we may not signal it). */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

const isRecord = (v: unknown): v is RunningListen => {
  if (typeof v !== 'object' || v === null) return false;
  const r = v as RunningListen;
  return Number.isSafeInteger(r.pid) && Number.isInteger(r.port) && typeof r.receiver === 'string' && (r.inspector === null || typeof r.inspector === 'string') && typeof r.started === 'string';
};

/** The listens that run now, as they recorded themselves, the last started first. Records of dead processes are removed. */
export async function runningListens(dir: string): Promise<RunningListen[]> {
  let names: string[];
  try {
    names = (await readdir(join(dir, FOLDER))).filter((n) => /^listen-\d+\.json$/.test(n));
  } catch {
    return [];
  }
  const out: RunningListen[] = [];
  for (const name of names) {
    const file = join(dir, FOLDER, name);
    let record: unknown;
    try {
      // read by the store folder's rules (another user's record, or a link, is passed over: mcp would
      // send the inspector's token to the address it names)
      const data = await readPrivateFile(join(dir, FOLDER), name, { what: 'the record of a running listen' });
      if (!data) continue;
      record = JSON.parse(data.toString('utf8'));
    } catch {
      continue; // being written, or not ours
    }
    if (!isRecord(record)) continue;
    if (alive(record.pid)) out.push(record);
    else await rm(file, { force: true }).catch(() => undefined);
  }
  return out.sort((a, b) => b.started.localeCompare(a.started));
}

/** The running listen on `port`, if one recorded itself. */
export async function listenOnPort(dir: string, port: number): Promise<RunningListen | undefined> {
  return (await runningListens(dir)).find((l) => l.port === port);
}
