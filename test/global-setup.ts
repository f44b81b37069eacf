import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** One folder for every temporary file of the run, removed at the end (the workers inherit its path). */
export default function setup(): () => void {
  const root = mkdtempSync(join(tmpdir(), 'wxhooks-tests-'));
  process.env.WXHOOKS_TEST_TMP = root;
  return () => rmSync(root, { recursive: true, force: true });
}
