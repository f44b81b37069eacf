import { readFileSync } from 'node:fs';

/**
 * Waits for the build's declarations (dist/**\/*.d.ts). `npm test` and `npm run test:all` start the tests
 * once the build's code is in dist/, tsc still writing the declarations beside them (scripts/checks.js);
 * the file WXHOOKS_TYPES_BUILT names says when that step ended, "ok" or "failed". Without it (vitest run
 * by hand, after `npm run build`) the declarations are there already. A test that reads them (the
 * published types, `npm pack`) calls this first, within its own budget.
 */
export async function typesBuilt(limitMs = 300_000): Promise<void> {
  const mark = process.env.WXHOOKS_TYPES_BUILT;
  if (!mark) return;
  const until = Date.now() + limitMs;
  for (;;) {
    let said: string | undefined;
    try {
      said = readFileSync(mark, 'utf8');
    } catch {
      // not ended yet
    }
    if (said === 'ok') return;
    if (said !== undefined) throw new Error("the build's declarations (tsc) failed: its errors are printed after the tests");
    if (Date.now() > until) throw new Error(`the build's declarations (tsc) not written after ${limitMs / 1000} s`);
    await new Promise((r) => setTimeout(r, 100)); // a poll of a file another process writes, not a wait for time to pass
  }
}
