import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { z } from 'zod';
import { version } from '../version.js';
import { registerDeliveryTools, registerVerifyTool } from './deliveries.js';
import { registerResources } from './resources.js';
import { registerServiceTools } from './service.js';
import { defineTool, type McpContext } from './tool.js';
import { registerWriteTools } from './writes.js';

export interface McpServerOptions extends McpContext {
  /** Offer the tools that create, change and delete webhooks and subscriptions. */
  allowWrite: boolean;
  input: NodeJS.ReadableStream;
  output: NodeJS.WritableStream;
}

const INSTRUCTIONS = `wxhooks: the webhooks of the weather forecast service, and the deliveries a local \`wxhooks listen\` received.
Start with status (what this server is attached to), then list_deliveries and get_delivery (a refused one says why, and what to do).
replay_delivery sends one again to the app, edited or not, and answers the app's new answer beside the old one.
wait_for_delivery and wait_for_run wait for what a trigger or the service should send; they say what is missing when it does not come.`;

/** The MCP server, on stdio: its tools, its resources; resolves once it is connected. */
export async function startMcpServer(o: McpServerOptions): Promise<{ close(): Promise<void> }> {
  const server = new McpServer({ name: 'wxhooks', version: version() }, { instructions: INSTRUCTIONS });
  defineTool(
    server,
    o,
    'status',
    {
      title: 'What this server is attached to',
      description:
        "What the delivery tools read: a running listen (its inspector, its receiver, the app it forwards to, its webhook), a shared store's history or a --save-dir folder; whether replay can be used, and where it sends; whether the write tools are offered.",
      inputSchema: z.strictObject({}),
      annotations: { readOnlyHint: true, openWorldHint: false },
    },
    async () => ({ attached: o.attachment?.about ?? null, write_tools: o.allowWrite }),
  );
  if (o.attachment) {
    registerDeliveryTools(server, o);
    registerResources(server, o, o.attachment);
  }
  registerVerifyTool(server, o);
  registerServiceTools(server, o);
  if (o.allowWrite) registerWriteTools(server, o);
  const transport = new StdioServerTransport(o.input as never, o.output as never);
  await server.connect(transport);
  return { close: () => server.close() };
}
