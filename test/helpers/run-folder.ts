import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * Before any test of either tier: one folder for every temporary file of the run, removed at the end (the
 * workers inherit its path through WXHOOKS_TEST_TMP; see tempDir in cli.ts). Both tiers' projects name
 * this setup; the second to run finds the folder made and leaves it to the first.
 */
export default function setup(): (() => void) | undefined {
  if (process.env.WXHOOKS_TEST_TMP) return undefined;
  const root = mkdtempSync(join(tmpdir(), 'wxhooks-tests-'));
  process.env.WXHOOKS_TEST_TMP = root;
  return () => {
    rmSync(root, { recursive: true, force: true });
    delete process.env.WXHOOKS_TEST_TMP;
  };
}
