import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type Conf from 'conf';
import { normalizeBaseUrl } from '../api/base-url.js';
import { UsageError } from '../errors.js';
import { configDir, ensurePrivateDir, settingsFileError } from './paths.js';

/** The settings `config get|set` knows, each with its check. */
export const SETTINGS: Record<string, { describe: string; check: (value: string) => string }> = {
  'base-url': {
    describe: 'the service address used when neither --base-url nor WX_BASE_URL is given',
    check: (v) => normalizeBaseUrl(v, 'base-url'),
  },
};

/** The settings file in the store folder: conf's plain JSON. */
export const settingsFile = (env: Record<string, string | undefined>) => join(configDir(env), 'settings.json');

/**
 * One stored setting, read straight from the file conf writes: every command that needs `base-url`
 * reads it so, sparing itself conf and its schema validator, which only `config` (writing) loads.
 */
export async function readSetting(env: Record<string, string | undefined>, key: string): Promise<string | undefined> {
  const file = settingsFile(env);
  let value: unknown;
  try {
    value = (JSON.parse(await readFile(file, 'utf8')) as Record<string, unknown> | null)?.[key];
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw settingsFileError(file, err);
  }
  return typeof value === 'string' ? value : undefined;
}

/** The settings, read and written through conf (`config get|set|unset|list`). */
export class Settings {
  private constructor(
    private readonly conf: Conf<Record<string, string>>,
    readonly file: string,
  ) {}

  static async open(env: Record<string, string | undefined>): Promise<Settings> {
    const dir = configDir(env);
    ensurePrivateDir(dir);
    const file = settingsFile(env);
    const { default: ConfClass } = await import('conf');
    const conf = guard(
      file,
      () =>
        new ConfClass<Record<string, string>>({
          projectName: 'wxhooks',
          cwd: dir,
          configName: 'settings',
          configFileMode: 0o600,
          accessPropertiesByDotNotation: false,
        }),
    );
    return new Settings(conf, file);
  }

  private guard<T>(fn: () => T): T {
    return guard(this.file, fn);
  }

  private static known(key: string): void {
    if (!(key in SETTINGS)) {
      throw new UsageError(`Unknown setting "${key}".`, { hint: `Known settings: ${Object.keys(SETTINGS).join(', ')}.` });
    }
  }

  get(key: string): string | undefined {
    Settings.known(key);
    return this.conf.get(key);
  }

  set(key: string, value: string): string {
    Settings.known(key);
    const checked = SETTINGS[key]!.check(value);
    this.guard(() => this.conf.set(key, checked));
    return checked;
  }

  unset(key: string): void {
    Settings.known(key);
    this.guard(() => this.conf.delete(key));
  }

  all(): Record<string, string> {
    return { ...this.conf.store };
  }
}

/** Runs a read or write of the settings file; what goes wrong is a usage error (exit 2) that names it. */
function guard<T>(file: string, fn: () => T): T {
  try {
    return fn();
  } catch (err) {
    throw settingsFileError(file, err);
  }
}
