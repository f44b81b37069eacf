import { randomBytes } from 'node:crypto';
import { access, constants, open, readFile, rename, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import lockfile from 'proper-lockfile';
import { UsageError } from '../errors.js';
import { fsReason, proveWritable } from '../util/files.js';
import { ensurePrivateDir, STORE_HINT } from './paths.js';

export interface StoredSecret {
  base_url: string;
  webhook_id: string;
  secret: string;
  created_at: string;
  url?: string;
}

interface SecretFile {
  version: 1;
  secrets: Record<string, Record<string, { secret: string; created_at: string; url?: string }>>;
}

const LOCK_OPTIONS = {
  realpath: false,
  stale: 10_000,
  retries: { retries: 200, factor: 1.2, minTimeout: 5, maxTimeout: 100, randomize: true },
} as const;

/**
 * Webhook secrets on disk, keyed by base URL and webhook id. Every change is a
 * locked read-modify-write with an atomic rename, so parallel processes never
 * lose each other's entries; the file is 0600 in a 0700 folder.
 */
export class SecretStore {
  readonly file: string;

  constructor(readonly dir: string) {
    this.file = join(dir, 'secrets.json');
  }

  /** Fails (exit 2) if a secret could not be written here, before anything is created. */
  async preflight(): Promise<void> {
    try {
      await proveWritable(this.dir, 0o700);
      const st = await stat(this.file).catch(() => undefined);
      if (st && !st.isFile()) throw new Error(`${this.file} is not a file`);
      if (st) await access(this.file, constants.R_OK | constants.W_OK);
    } catch (err) {
      throw new UsageError(`The secret store at ${this.dir} is not writable, so a new webhook's one-time secret could not be kept: ${(err as Error).message}`, {
        hint: 'Fix the folder (or point WXHOOKS_CONFIG_DIR somewhere writable) and try again; or pass --no-save to take the secret from the output yourself.',
        cause: err,
      });
    }
    await this.read(); // a damaged store stops the create too: the new secret could not be added to it
  }

  private async read(): Promise<SecretFile> {
    let text: string;
    try {
      text = await readFile(this.file, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { version: 1, secrets: {} };
      throw new UsageError(`Cannot read the secret store ${this.file}: ${fsReason(err)}.`, { hint: STORE_HINT, cause: err });
    }
    try {
      const parsed = JSON.parse(text) as SecretFile;
      if (typeof parsed !== 'object' || parsed === null || typeof parsed.secrets !== 'object') throw new Error('no "secrets" object');
      return parsed;
    } catch (err) {
      throw new UsageError(`The secret store ${this.file} is damaged (${(err as Error).message}); it was left untouched.`, {
        hint: 'Move it aside and restore it from a backup; wxhooks will not overwrite it.',
      });
    }
  }

  private async writeAtomic(data: SecretFile): Promise<void> {
    const tmp = `${this.file}.${process.pid}.${randomBytes(6).toString('hex')}.tmp`;
    const handle = await open(tmp, 'wx', 0o600);
    try {
      await handle.writeFile(`${JSON.stringify(data, null, 2)}\n`, 'utf8');
      await handle.sync();
    } finally {
      await handle.close();
    }
    try {
      await rename(tmp, this.file);
    } catch (err) {
      await rm(tmp, { force: true });
      throw err;
    }
  }

  private async locked<T>(fn: (data: SecretFile) => T | Promise<T>, write: boolean): Promise<T> {
    ensurePrivateDir(this.dir);
    const release = await lockfile.lock(this.file, LOCK_OPTIONS);
    try {
      const data = await this.read();
      const result = await fn(data);
      if (write) await this.writeAtomic(data);
      return result;
    } finally {
      await release().catch(() => undefined);
    }
  }

  async save(baseUrl: string, webhookId: string, secret: string, url?: string): Promise<void> {
    await this.locked((data) => {
      const forBase = (data.secrets[baseUrl] ??= {});
      forBase[webhookId] = { secret, created_at: new Date().toISOString(), ...(url ? { url } : {}) };
    }, true);
  }

  async get(baseUrl: string, webhookId: string): Promise<StoredSecret | undefined> {
    const data = await this.read();
    const entry = data.secrets[baseUrl]?.[webhookId];
    return entry ? { base_url: baseUrl, webhook_id: webhookId, ...entry } : undefined;
  }

  async list(baseUrl?: string): Promise<StoredSecret[]> {
    const data = await this.read();
    const out: StoredSecret[] = [];
    for (const [base, entries] of Object.entries(data.secrets)) {
      if (baseUrl && base !== baseUrl) continue;
      for (const [id, entry] of Object.entries(entries)) out.push({ base_url: base, webhook_id: id, ...entry });
    }
    return out;
  }

  /** Returns whether there was something to remove. */
  async remove(baseUrl: string, webhookId: string): Promise<boolean> {
    return this.locked((data) => {
      const forBase = data.secrets[baseUrl];
      if (!forBase || !(webhookId in forBase)) return false;
      delete forBase[webhookId];
      if (Object.keys(forBase).length === 0) delete data.secrets[baseUrl];
      return true;
    }, true);
  }
}
