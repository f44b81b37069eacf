import Conf from 'conf';
import { join } from 'node:path';
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

export class Settings {
  private readonly conf: Conf<Record<string, string>>;
  readonly file: string;

  constructor(env: Record<string, string | undefined>) {
    const dir = configDir(env);
    ensurePrivateDir(dir);
    this.file = join(dir, 'settings.json');
    this.conf = this.guard(
      () =>
        new Conf<Record<string, string>>({
          projectName: 'wxhooks',
          cwd: dir,
          configName: 'settings',
          configFileMode: 0o600,
          accessPropertiesByDotNotation: false,
        }),
    );
  }

  /** Runs a read or write of the settings file; what goes wrong is a usage error (exit 2) that names it. */
  private guard<T>(fn: () => T): T {
    try {
      return fn();
    } catch (err) {
      throw settingsFileError(this.file, err);
    }
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
