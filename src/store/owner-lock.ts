import { randomBytes } from 'node:crypto';
import { closeSync, openSync, readFileSync, readlinkSync, rmSync, statSync } from 'node:fs';
import { hostname } from 'node:os';
import { basename } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import * as DEFAULTS from '../delivery/defaults.js';
import { UsageError } from '../errors.js';
import { fsReason, writeFileAtomicSync } from '../util/files.js';
import { printable } from '../util/printable.js';
import { STORE_HINT } from './paths.js';

/**
 * One owner at a time for a processed-pairs file: two processes appending to one file would each forget
 * the pairs the other processed (each remembers only its own, and rewrites the file with them), and
 * process a delivery twice. The owner is written in `<file>.owner` (its pid, host, when it started, and a
 * token of this opening) for as long as the store is open.
 *
 * Whether a recorded owner still runs is asked of the system, not of the clock: on this host, a process
 * that is gone (kill -9, a crash, a reboot, or its pid now another process's) has left the file, and it is
 * taken over at once. (proper-lockfile judges its locks stale by age, which would make a restart after
 * kill -9 wait, and let a live owner whose event loop stalled lose its lock; and loading it installs
 * signal-exit's handlers for a dozen signals: DECISIONS.md.) A guard file, held for the microseconds in
 * which the owner file is read and replaced, keeps two processes starting together from both taking it.
 */

/** Who holds a pairs file. */
export interface Owner {
  pid: number;
  host: string;
  /** When it started, ISO 8601 (for people). */
  started: string;
  /** What it runs: the script, and wxhooks' command (never an app's arguments: they may hold secrets). */
  command: string;
  /** This opening of the file (a process may open and close it several times). */
  token: string;
  /** On Linux: the boot, the pid namespace and the process's start (clock ticks since boot), so that a pid reused by another process is not taken for the owner. */
  boot?: string;
  ns?: string;
  start?: number;
  /** It holds the file for seconds, not for as long as a receiver runs (`reconcile --catch-up`): an opener waits for it rather than refuse. */
  brief?: true;
}

/** Who asks: the advice for a file in use differs; `reconcile` holds the file only briefly. */
export type StoreDoor = 'listen' | 'app' | 'reconcile';

/** Thrown inside the guard: the file is held by a live brief holder, to be waited for. */
class HeldBriefly extends Error {}

export interface Ownership {
  /** The owner file. */
  readonly file: string;
  /** The owner found in the file, gone, whose file was taken over. */
  readonly previous: Owner | undefined;
  /** Writes the owner file again if it was deleted (someone cleaning the folder) while the store runs. */
  check(): void;
  /** Lets the file go (the owner file is removed if it is still ours). */
  release(): void;
}

/** A guard older than this was left by a process that died in the microseconds it holds one. */
const GUARD_STALE_MS = 2000;

/** The openings held by this process (a record with our own pid and another token is a previous process's). */
const heldHere = new Set<string>();

let self: Omit<Owner, 'token'> | undefined;

/** This process, as an owner file records it. */
function me(): Omit<Owner, 'token'> {
  if (self) return self;
  const script = process.argv[1] ? basename(process.argv[1]).slice(0, 60) : 'node';
  self = {
    pid: process.pid,
    host: hostname(),
    started: new Date(Date.now() - process.uptime() * 1000).toISOString(),
    // wxhooks' own command (`wxhooks.js listen`); of any other program, its script only
    command: script.startsWith('wxhooks') && /^[a-z]{1,20}$/.test(process.argv[2] ?? '') ? `${script} ${process.argv[2]}` : script,
    boot: readText('/proc/sys/kernel/random/boot_id'),
    ns: readLink('/proc/self/ns/pid'),
    start: processStart('self'),
  };
  return self;
}

/**
 * Takes `<file>.owner` for this process, or refuses (a UsageError, exit 2) if a live process holds it.
 * One held by a process that is gone is taken over: `previous` says whose it was.
 */
export async function ownFile(file: string, door: StoreDoor): Promise<Ownership> {
  const ownerFile = `${file}.owner`;
  const mine: Owner = { ...me(), token: randomBytes(8).toString('hex'), ...(door === 'reconcile' ? { brief: true as const } : {}) };
  let previous: Owner | undefined;
  const started = Date.now();
  for (;;) {
    try {
      previous = await guarded(`${ownerFile}.guard`, () => {
        const found = readOwner(ownerFile);
        const state = found && stateOf(found);
        if (found && state !== 'gone') {
          // a reconcile handing over its catch-ups lets go within seconds: wait for it rather than refuse
          if (found.brief && state === 'running' && Date.now() - started < DEFAULTS.storeBriefWaitMs) throw new HeldBriefly();
          throw inUse(file, ownerFile, found, state!, door);
        }
        writeOwner(ownerFile, mine, 'replace');
        return found;
      });
      break;
    } catch (err) {
      if (err instanceof HeldBriefly) {
        await sleep(50);
        continue;
      }
      if (err instanceof UsageError) throw err;
      throw new UsageError(`Cannot lock the processed-pairs file ${file}: ${fsReason(err)}.`, { hint: STORE_HINT, cause: err });
    }
  }
  heldHere.add(mine.token);
  return {
    file: ownerFile,
    previous,
    check() {
      if (readOwner(ownerFile)) return;
      try {
        writeOwner(ownerFile, mine, 'create');
      } catch {
        // someone wrote one meanwhile, or the folder cannot be written: the next look tries again
      }
    },
    release() {
      heldHere.delete(mine.token);
      if (readOwner(ownerFile)?.token === mine.token) rmSync(ownerFile, { force: true });
    },
  };
}

/**
 * Runs `work` (synchronous: it holds the guard for microseconds) while holding the guard, a file created
 * exclusively (O_EXCL; a folder's rmdir cost 2.7 ms here, a file's unlink 0.04 ms), waiting for another
 * process's turn if need be (at most ~10 s: one left by a process that died holding it is stale after
 * GUARD_STALE_MS, and removed).
 */
async function guarded<T>(guard: string, work: () => T): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    try {
      closeSync(openSync(guard, 'wx', 0o600));
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST' || attempt >= 200) throw err;
      const made = statSync(guard, { throwIfNoEntry: false })?.mtimeMs;
      if (made !== undefined && Math.abs(Date.now() - made) > GUARD_STALE_MS) {
        rmSync(guard, { force: true });
        continue;
      }
      await sleep(5 + Math.random() * 45);
    }
  }
  try {
    return work();
  } finally {
    rmSync(guard, { force: true });
  }
}

/** Whether the recorded owner runs: here (this process), on this host, elsewhere (cannot be asked), or gone. */
function stateOf(owner: Owner): 'this process' | 'running' | 'elsewhere' | 'gone' {
  const i = me();
  if (owner.host !== i.host) return 'elsewhere';
  if (owner.boot && i.boot && owner.boot !== i.boot) return 'gone'; // the machine restarted since
  if (owner.ns && i.ns && owner.ns !== i.ns) return 'elsewhere'; // another container with the same host name: its pids are not ours to ask
  if (owner.pid === i.pid) return heldHere.has(owner.token) ? 'this process' : 'gone';
  try {
    process.kill(owner.pid, 0);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ESRCH') return 'gone';
    // EPERM: it runs, as another user
  }
  if (owner.start !== undefined) {
    const start = processStart(owner.pid);
    if (start !== undefined && start !== owner.start) return 'gone'; // its pid is another process's now
  }
  return 'running';
}

function inUse(file: string, ownerFile: string, owner: Owner, state: 'this process' | 'running' | 'elsewhere', door: StoreDoor): UsageError {
  const who =
    state === 'this process' ? 'this process, which has it open already' : `process ${owner.pid}${state === 'elsewhere' ? ` on ${owner.host}` : ''} (${owner.command}, started ${owner.started})`;
  const advice =
    door === 'reconcile'
      ? 'reconcile --catch-up hands its catch-ups to a running `listen --webhook ID` of this webhook when there is one; this holder is not one it found. Run reconcile again once it has stopped.'
      : door === 'listen'
        ? 'Run one listen per webhook: `listen --webhook ID` keeps a file of its own for each webhook (with --secret-env, give each listen its own WXHOOKS_CONFIG_DIR). Several receivers of one webhook share a PostgreSQL store instead (--store postgres://…), which processes each delivery once whichever receives it.'
        : "Give each instance of the app its own dir, or share one PostgreSQL store between them (openStore('postgres://…')), which processes each delivery once whichever instance receives it.";
  const stale = state === 'elsewhere' ? ` If that process no longer runs, remove ${ownerFile}.` : '';
  return new UsageError(`The processed-pairs file ${file} is in use by ${who}. Two processes cannot share one: each would forget the pairs the other processed, and process a delivery twice.`, {
    hint: `${advice}${stale}`,
  });
}

/** The owner recorded in the file, or undefined if there is none (or it is not one: taken over). */
function readOwner(ownerFile: string): Owner | undefined {
  let o: Partial<Owner>;
  try {
    o = JSON.parse(readFileSync(ownerFile, 'utf8')) as Partial<Owner>;
  } catch {
    return undefined;
  }
  if (!o || !Number.isSafeInteger(o.pid) || o.pid! <= 0 || typeof o.host !== 'string' || typeof o.token !== 'string') return undefined;
  // what is shown of it is made printable and short: the file is in a folder others may have written to
  const shown = (v: unknown) => printable(String(v ?? '?')).slice(0, 100);
  return {
    pid: o.pid!,
    host: shown(o.host),
    token: o.token,
    started: shown(o.started),
    command: shown(o.command),
    boot: str(o.boot),
    ns: str(o.ns),
    start: Number.isSafeInteger(o.start) ? o.start : undefined,
    ...(o.brief === true ? { brief: true as const } : {}),
  };
}

/** Writes the owner file whole: renamed over whatever is there (`replace`), or linked where nothing is (`create`, which fails if something is). */
function writeOwner(ownerFile: string, owner: Owner, how: 'replace' | 'create'): void {
  // not synced: the owner file says who runs now, and after a crash nobody does
  writeFileAtomicSync(ownerFile, `${JSON.stringify(owner)}\n`, { exclusive: how === 'create', sync: false });
}

/** A process's start, in clock ticks since boot (Linux's /proc/PID/stat, field 22); undefined elsewhere. */
function processStart(pid: number | 'self'): number | undefined {
  const stat = readText(`/proc/${pid}/stat`);
  if (!stat) return undefined;
  // the command name (field 2) is in parentheses and may hold spaces and parentheses: count from the last ')'
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const start = Number(fields[19]);
  return Number.isSafeInteger(start) ? start : undefined;
}

function readText(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8').trim() || undefined;
  } catch {
    return undefined;
  }
}

function readLink(path: string): string | undefined {
  try {
    return readlinkSync(path);
  } catch {
    return undefined;
  }
}

const str = (v: unknown) => (typeof v === 'string' ? v : undefined);
