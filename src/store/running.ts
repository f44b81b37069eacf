import { rmSync } from 'node:fs';
import { readdir, readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { writeFileAtomic } from '../util/files.js';
import { ensurePrivateDir } from './paths.js';

/**
 * A running `listen --inspect`, as it records itself in the store folder so that `wxhooks mcp` can find
 * it: where its inspector and its receiver are, and what it forwards to. Never the inspector's token,
 * which is kept apart (inspector-token.json), nor a secret.
 */
export interface RunningListen {
  pid: number;
  /** The inspector's address, without its token. */
  inspector: string;
  receiver: string;
  forward_to: string | null;
  webhook_id: string | null;
  /** When it started (ISO 8601). */
  started: string;
}

const FOLDER = 'running';
const fileOf = (dir: string, pid: number) => join(dir, FOLDER, `listen-${pid}.json`);

/**
 * Records a running listen for as long as its inspector runs: the record is written now, and removed when
 * the inspector is closed, or when the process exits without closing it (a second Ctrl-C). Under kill -9
 * it stays, and readers pass over it (its pid is dead). A record that cannot be written costs nothing but
 * being found: `wxhooks mcp --listen URL` still works.
 */
export async function recordRunning<T extends { close(): Promise<void> }>(dir: string, record: RunningListen, inspector: T): Promise<T> {
  const file = fileOf(dir, record.pid);
  try {
    ensurePrivateDir(join(dir, FOLDER));
    await writeFileAtomic(file, `${JSON.stringify(record)}\n`);
  } catch {
    return inspector;
  }
  const forget = () => rmSync(file, { force: true });
  process.once('exit', forget);
  return {
    ...inspector,
    async close() {
      process.off('exit', forget);
      try {
        forget();
      } finally {
        await inspector.close();
      }
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

const isRecord = (v: unknown): v is RunningListen =>
  typeof v === 'object' && v !== null && Number.isInteger((v as RunningListen).pid) && typeof (v as RunningListen).inspector === 'string' && typeof (v as RunningListen).started === 'string';

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
      record = JSON.parse(await readFile(file, 'utf8'));
    } catch {
      continue; // being written, or not ours
    }
    if (!isRecord(record)) continue;
    if (alive(record.pid)) out.push(record);
    else await rm(file, { force: true }).catch(() => undefined);
  }
  return out.sort((a, b) => b.started.localeCompare(a.started));
}
