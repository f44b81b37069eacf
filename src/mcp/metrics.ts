import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { z } from 'zod';
import { RefusedError } from '../errors.js';
import { attached, defineTool, type McpContext } from './tool.js';

/**
 * `metrics`: the counters of the attached listen's run, the figures its inspector's Figures view shows and
 * `listen --metrics` exposes (src/observe/figures.ts): requests by outcome, refusals by reason, the app's
 * answers (by status class, p50 and p95), the delivery lag (p50, p95), late notifications.
 */
export function registerMetricsTool(server: McpServer, m: McpContext): void {
  defineTool(
    server,
    m,
    'metrics',
    {
      title: "This run's figures",
      description:
        "The counters of the attached listen since it started, as its inspector's Figures view and `listen --metrics` give them: requests by outcome, refusals by reason, your app's answers by status class with their p50 and p95 (ms), the forecast's delivery lag (received minus created_at) p50 and p95 (s), and with --watch-runs the late notifications. Only a running listen keeps them (not a store's history or a folder).",
      inputSchema: z.strictObject({}),
      annotations: { readOnlyHint: true, openWorldHint: false },
    },
    async () => {
      const a = attached(m);
      if (!a.figures) {
        throw new RefusedError(`The ${a.about.kind === 'store' ? "store's history" : 'folder'} this server reads keeps no run's figures: a running listen counts them.`, {
          hint: 'Start this server beside a running `wxhooks listen --inspect` (or give --listen its address).',
        });
      }
      return { ...(await a.figures()) };
    },
  );
}
