import { access, constants, stat } from 'node:fs/promises';
import { join } from 'node:path';
import lockfile from 'proper-lockfile';
import { UsageError } from '../errors.js';
import { jsonProblem, proveWritable, writeFileAtomic } from '../util/files.js';
import { ensurePrivateDir, secretFolderWarning } from './paths.js';
import { readPrivateFile } from './private-file.js';

export interface StoredSecret {
  base_url: string;
  webhook_id: string;
  secret: string;
  created_at: string;
  url?: string;
}

interface Entry {
  secret: string;
  created_at: string;
  url?: string;
}

interface SecretFile {
  version: 1;
  secrets: Record<string, Record<string, Entry>>;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** What is wrong with the file's structure, or undefined: `{secrets: {BASE_URL: {WEBHOOK_ID: {secret, created_at, url?}}}}`. */
function structureProblem(data: unknown): string | undefined {
  if (!isObject(data) || !isObject(data.secrets)) return 'it has no "secrets" object';
  for (const [base, entries] of Object.entries(data.secrets)) {
    if (!isObject(entries)) return `the entry for ${JSON.stringify(base.slice(0, 80))} is not an object`;
    for (const [id, entry] of Object.entries(entries)) {
      const where = `webhook ${JSON.stringify(id.slice(0, 40))} of ${JSON.stringify(base.slice(0, 80))}`;
      if (!isObject(entry)) return `the entry of ${where} is not an object`;
      if (typeof entry.secret !== 'string' || !entry.secret) return `the entry of ${where} has no secret (a text)`;
      if (entry.created_at !== undefined && typeof entry.created_at !== 'string') return `the entry of ${where} has a created_at that is not a text`;
      if (entry.url !== undefined && typeof entry.url !== 'string') return `the entry of ${where} has a url that is not a text`;
    }
  }
  return undefined;
}

const LOCK_OPTIONS = {
  realpath: false,
  stale: 10_000,
  retries: { retries: 200, factor: 1.2, minTimeout: 5, maxTimeout: 100, randomize: true },
} as const;

/**
 * Webhook secrets on disk, keyed by base URL and webhook id. Every change is a
 * locked read-modify-write with an atomic rename, so parallel processes never
 * lose each other's entries; the file is 0600 in a 0700 folder. Every read, a
 * change's included, first checks that no one else could have put the file there.
 */
export class SecretStore {
  readonly file: string;
  private readonly warned = new Set<string>();

  /** `warn` is told, once each, what is worth a warning (a secrets.json others can read). */
  constructor(
    readonly dir: string,
    private readonly warn?: (text: string) => void,
  ) {
    this.file = join(dir, 'secrets.json');
  }

  /**
   * Fails (exit 2) if a secret could not be written here, before anything is created: the folder must be
   * writable, and private enough (see secretFolderWarning). Returns a warning to show, if there is one.
   */
  async preflight(): Promise<string | undefined> {
    const warning = secretFolderWarning(this.dir);
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
    return warning;
  }

  /** A warning about the folder others can read, or undefined; throws (exit 2) for a folder others can write. */
  folderWarning(): string | undefined {
    return secretFolderWarning(this.dir);
  }

  private async read(): Promise<SecretFile> {
    secretFolderWarning(this.dir); // refuses a folder others could write to, or another user's
    const bytes = await readPrivateFile(this.dir, 'secrets.json', {
      what: 'the secret store',
      sensitive: true,
      warn: (text) => {
        if (this.warned.has(text)) return;
        this.warned.add(text);
        this.warn?.(text);
      },
    });
    if (!bytes) return { version: 1, secrets: {} };
    let parsed: unknown;
    try {
      parsed = JSON.parse(bytes.toString('utf8'));
    } catch (err) {
      throw damaged(this.file, jsonProblem(err));
    }
    const problem = structureProblem(parsed);
    if (problem) throw damaged(this.file, problem);
    return parsed as SecretFile;
  }

  private async locked<T>(fn: (data: SecretFile) => T | Promise<T>, write: boolean): Promise<T> {
    ensurePrivateDir(this.dir);
    secretFolderWarning(this.dir); // refuses a folder others could write to, before the lock is taken
    const release = await lockfile.lock(this.file, LOCK_OPTIONS);
    try {
      const data = await this.read();
      const result = await fn(data);
      if (write) await writeFileAtomic(this.file, `${JSON.stringify(data, null, 2)}\n`);
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

  async list(): Promise<StoredSecret[]> {
    const data = await this.read();
    const out: StoredSecret[] = [];
    for (const [base, entries] of Object.entries(data.secrets)) {
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

function damaged(file: string, problem: string): UsageError {
  return new UsageError(`The secret store ${file} is damaged (${problem}); it was left untouched.`, {
    hint: 'Move it aside and restore it from a backup; wxhooks will not overwrite it.',
  });
}
