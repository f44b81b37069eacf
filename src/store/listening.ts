import { readdir, readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { writeFileAtomic } from '../util/files.js';
import { ensurePrivateDir } from './paths.js';

/** A `wxhooks listen` that runs on this machine: where it listens, and for what. */
export interface RunningListen {
  pid: number;
  host: string;
  port: number;
  url: string;
  /** The webhook whose secret it verifies with (--webhook, or its temporary one), when it has one. */
  webhook_id: string | null;
  base_url: string | null;
  started: string;
}

const FOLDER = 'listening';

/** Whether a process of this machine is still running (a kill -9'd listen leaves its entry behind). */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Says, in the store folder, that this listen runs (a file of its own under listening/, removed when it
 * stops): so that `doctor` can check through a listen that holds the port, and a second listen can name
 * the one in its way. Returns what removes it; never throws (it is a courtesy, not a rule).
 */
export async function announceListen(dir: string, entry: RunningListen): Promise<() => Promise<void>> {
  const file = join(dir, FOLDER, `${entry.pid}-${entry.port}.json`);
  try {
    ensurePrivateDir(join(dir, FOLDER));
    await writeFileAtomic(file, `${JSON.stringify(entry)}\n`);
  } catch {
    return async () => undefined;
  }
  return () => rm(file, { force: true }).catch(() => undefined);
}

/** The listens running on this machine that said so in this store folder (entries of ended ones are removed). */
export async function runningListens(dir: string): Promise<RunningListen[]> {
  const folder = join(dir, FOLDER);
  const names = await readdir(folder).catch(() => [] as string[]);
  const out: RunningListen[] = [];
  for (const name of names.filter((n) => n.endsWith('.json'))) {
    try {
      const entry = JSON.parse(await readFile(join(folder, name), 'utf8')) as RunningListen;
      if (Number.isSafeInteger(entry.pid) && alive(entry.pid)) out.push(entry);
      else await rm(join(folder, name), { force: true });
    } catch {
      // being written, or not ours: left alone
    }
  }
  return out;
}

/** The running listen on `port`, if one said so. */
export async function listenOnPort(dir: string, port: number): Promise<RunningListen | undefined> {
  return (await runningListens(dir)).find((l) => l.port === port);
}
