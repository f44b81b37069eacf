import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    pool: 'forks',
    // Two files at a time on two cores: most tests wait on sockets and child processes, and vitest's
    // default (one fewer than the cores) ran them one after another.
    maxWorkers: 2,
    globalSetup: ['test/global-setup.ts'],
  },
});
