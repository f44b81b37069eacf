import { existsSync, mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { Browser } from 'playwright-core';

/** Where the browser tests leave their screenshots (kept after the run, not committed). */
export const ARTIFACTS = resolve(import.meta.dirname, '../../artifacts');

export function artifact(name: string): string {
  mkdirSync(ARTIFACTS, { recursive: true });
  return join(ARTIFACTS, name);
}

/**
 * A headless Chromium: CHROMIUM_PATH, else Debian's /usr/bin/chromium (which .ci/run installs when it is
 * missing). Never skipped: if none can start, the test fails and says why.
 */
export async function launchBrowser(): Promise<Browser> {
  const { chromium } = await import('playwright-core');
  const tried: string[] = [];
  const flags = ['--headless=new', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'];
  const candidates: (() => Promise<{ executablePath: string; args: string[] }>)[] = [];
  if (process.env.CHROMIUM_PATH) candidates.push(async () => ({ executablePath: process.env.CHROMIUM_PATH!, args: flags }));
  if (existsSync('/usr/bin/chromium')) candidates.push(async () => ({ executablePath: '/usr/bin/chromium', args: flags }));
  for (const candidate of candidates) {
    try {
      const { executablePath, args } = await candidate();
      return await chromium.launch({ executablePath, args, headless: true });
    } catch (err) {
      tried.push((err as Error).message.split('\n')[0]!);
    }
  }
  throw new Error(`no Chromium could be started (set CHROMIUM_PATH, or install Debian's chromium, as .ci/run does): ${tried.join('; ') || 'none found'}`);
}
