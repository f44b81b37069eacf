import { defineConfig } from 'vitest/config';
import { BaseSequencer, type TestSpecification } from 'vitest/node';

/**
 * The full tier's files first, then the fast tier's: vitest would run the projects in the order of their
 * names (fast, then full), leaving the full tier's long files to the end, with one core idle while the last
 * of them runs; the fast tier's many short files fill the end instead. Within a tier, vitest's own order
 * (the longest last time first; else the largest file).
 */
class FullTierFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const sorted = await super.sort(files);
    return [...sorted.filter((f) => f.project.name === 'full'), ...sorted.filter((f) => f.project.name !== 'full')];
  }
}

// Two tiers, told apart by where a file lives (docs/testing.md):
// - fast (`npm test`): every test file outside test/full/; needs nothing but `npm ci`;
// - full (`npm run test:all` runs both): test/full/ and below; PostgreSQL, Chromium, the brokers, the
//   shells, packaging, and the long chains and faults. Its global setup checks the programs it drives and
//   starts the services its files share, once per run.
export default defineConfig({
  test: {
    testTimeout: 30_000,
    hookTimeout: 30_000,
    pool: 'forks',
    // Two files at a time on two cores: most tests wait on sockets and child processes, and vitest's
    // default (one fewer than the cores) ran them one after another.
    maxWorkers: 2,
    sequence: { sequencer: FullTierFirst },
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
        },
      },
      {
        extends: true,
        test: { name: 'full', include: ['test/full/**/*.test.ts'], globalSetup: ['test/helpers/run-folder.ts', 'test/full/global-setup.ts'] },
      },
    ],
  },
});
