import { join } from 'node:path';
import { normalizeBaseUrl } from '../api/base-url.js';
import { UsageError } from '../errors.js';
import { writeFileAtomic } from '../util/files.js';
import { configDir, ensurePrivateDir, settingsFileError } from './paths.js';
import { readPrivateFile } from './private-file.js';

/** The settings `config get|set` knows, each with its check. */
export const SETTINGS: Record<string, { describe: string; check: (value: string) => string }> = {
  'base-url': {
    describe: 'the service address used when neither --base-url nor WX_BASE_URL is given',
    check: (v) => normalizeBaseUrl(v, 'base-url'),
  },
};

/** The settings file in the store folder: plain JSON, as conf wrote it before (tab-indented). */
export const settingsFile = (env: Record<string, string | undefined>): string => join(configDir(env), 'settings.json');

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * Every stored setting, read only if no one else could have put the file there (readPrivateFile): a
 * planted `base-url` would send the API key to another user's server. A damaged file is a usage error
 * (exit 2) that names it.
 */
async function readSettings(env: Record<string, string | undefined>): Promise<Record<string, unknown>> {
  const file = settingsFile(env);
  const bytes = await readPrivateFile(configDir(env), 'settings.json', { what: 'the settings file' });
  if (!bytes) return {};
  let parsed: unknown;
  try {
    parsed = JSON.parse(bytes.toString('utf8'));
  } catch (err) {
    throw settingsFileError(file, err);
  }
  if (!isObject(parsed)) throw settingsFileError(file, new SyntaxError('not a JSON object'));
  return parsed;
}

/** One stored setting: every command that needs `base-url` reads it so. */
export async function readSetting(env: Record<string, string | undefined>, key: string): Promise<string | undefined> {
  const value = (await readSettings(env))[key];
  return typeof value === 'string' ? value : undefined;
}

/**
 * The settings, read and written (`config get|set|unset|list`). (conf did this until #32.10: it reads the
 * file by its path on every access, following links, with no way to ask who owns it.)
 */
export class Settings {
  private constructor(
    private readonly env: Record<string, string | undefined>,
    readonly file: string,
  ) {}

  static async open(env: Record<string, string | undefined>): Promise<Settings> {
    ensurePrivateDir(configDir(env));
    return new Settings(env, settingsFile(env));
  }

  private static known(key: string): void {
    if (!(key in SETTINGS)) {
      throw new UsageError(`Unknown setting "${key}".`, { hint: `Known settings: ${Object.keys(SETTINGS).join(', ')}.` });
    }
  }

  private async change(fn: (data: Record<string, unknown>) => void): Promise<void> {
    const data = await readSettings(this.env);
    fn(data);
    try {
      await writeFileAtomic(this.file, JSON.stringify(data, undefined, '\t'));
    } catch (err) {
      throw settingsFileError(this.file, err);
    }
  }

  async get(key: string): Promise<string | undefined> {
    Settings.known(key);
    const value = (await readSettings(this.env))[key];
    return typeof value === 'string' ? value : undefined;
  }

  async set(key: string, value: string): Promise<string> {
    Settings.known(key);
    const checked = SETTINGS[key]!.check(value);
    await this.change((data) => (data[key] = checked));
    return checked;
  }

  async unset(key: string): Promise<void> {
    Settings.known(key);
    await this.change((data) => delete data[key]);
  }

  async all(): Promise<Record<string, unknown>> {
    return readSettings(this.env);
  }
}
