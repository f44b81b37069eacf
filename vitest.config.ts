import { defineConfig } from 'vitest/config';

// Two tiers, told apart by where a file lives (docs/testing.md):
// - fast (`npm test`): every test file outside test/full/; needs nothing but `npm ci`;
// - full (`npm run test:all` runs both): test/full/ and below; PostgreSQL, Chromium, the brokers, the
//   shells, packaging, and the long chains and faults. Its global setup checks the programs it drives and
//   starts the services its files share, once per run.
// In `test:all` the full tier runs first, then the fast tier (`sequence.groupOrder`), each with workers of
// its own count; within a tier, vitest's own order (the longest last time first; else the largest file).
export default defineConfig({
  test: {
    testTimeout: 30_000,
    hookTimeout: 30_000,
    pool: 'forks',
    // Two files at a time on two cores: most tests wait on sockets and child processes, and vitest's
    // default (one fewer than the cores) ran them one after another. The full tier's count (a third
    // worker measured the same: BENCHMARKS.md), and its Chromiums' (test/full/global-setup.ts).
    maxWorkers: 2,
    projects: [
      {
        extends: true,
        test: {
          name: 'fast',
          include: ['test/**/*.test.ts'],
          exclude: ['test/full/**'],
          globalSetup: ['test/helpers/run-folder.ts'],
          // Each worker runs its files one after another in one module graph: the tier's files start
          // no process of their own and change no global state, and a file no longer pays for loading
          // the CLI again (30 s of CPU for the tier instead of 50, measured 2026-11-28).
          isolate: false,
          // Four files at a time: the tier's longest files are its end-to-end ones, which wait on real
          // HTTP timeouts (6 × --read-timeout) and on servers more than they compute; two at a time left
          // the cores a quarter idle. `vitest run --project fast` 44.6 s → 29.0 s back to back, its CPU
          // the same (2026-11-28, BENCHMARKS.md).
          maxWorkers: 4,
          sequence: { groupOrder: 1 },
        },
      },
      {
        extends: true,
        test: { name: 'full', include: ['test/full/**/*.test.ts'], sequence: { groupOrder: 0 }, globalSetup: ['test/helpers/run-folder.ts', 'test/full/global-setup.ts'] },
      },
    ],
  },
});
