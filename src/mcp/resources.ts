import { ResourceTemplate, type McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { ErrorCode, McpError, SubscribeRequestSchema, UnsubscribeRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import type { Listed } from '../receiver/listed.js';
import { redact } from '../util/redact.js';
import { isKnownType } from '../vocabulary.js';
import { BODY, PAGE, safeJson } from './answers.js';
import type { Attachment } from './attachment.js';
import { wholeDelivery } from './deliveries.js';
import type { McpContext } from './tool.js';

const LIST_URI = 'wxhooks://deliveries';
/** The most often a subscriber is told of changes (a busy listen takes thousands of deliveries a second). */
const NOTIFY_MS = 250;
const deliveryUri = (id: number) => `${LIST_URI}/${id}`;

/**
 * A delivery's name in a client's list of resources, which a client shows as it is (no marks there): only
 * words of wxhooks' own, so a refused request's claims (any type, any text) are never in it.
 */
function nameOf(r: Listed): string {
  const mine = r.trigger_id !== undefined; // verified: its type is one the service signed
  const type = mine && r.type !== undefined && isKnownType(r.type) ? r.type : mine ? 'delivery' : 'refused request';
  const hour = mine && r.type === 'forecast_hour.available' && Number.isInteger(r.forecast_hour) ? ` +${r.forecast_hour}h` : '';
  return `#${r.id} ${type}${hour} (${r.outcome})`;
}

/**
 * The deliveries as resources: `wxhooks://deliveries` (the newest page of them) and
 * `wxhooks://deliveries/{id}` (one, whole, as get_delivery answers it). A client that subscribes to the
 * first is told each time a new delivery arrives; to one delivery, each time a new attempt or a replay of
 * it arrives. The attachment is watched only while someone is subscribed.
 */
export function registerResources(server: McpServer, m: McpContext, source: Attachment): void {
  // deliveries are content from outside: the session's marks around them, as the tools' answers have
  const json = (uri: string, value: unknown) => ({ contents: [{ uri, mimeType: 'text/plain', text: m.outside.wrap(safeJson(value)) }] });
  server.registerResource(
    'deliveries',
    LIST_URI,
    {
      title: 'Deliveries',
      description: `The newest ${PAGE.default} deliveries the attached listen (or history) has, newest first. Subscribe to be told when a new one arrives.`,
      mimeType: 'text/plain',
    },
    async (uri) => {
      const all = await source.records().catch(failed);
      return json(uri.href, { attached: source.about.where, deliveries: all.slice(-PAGE.default).reverse(), newest_id: all.at(-1)?.id ?? 0 });
    },
  );

  server.registerResource(
    'delivery',
    new ResourceTemplate(`${LIST_URI}/{id}`, {
      list: async () => ({
        resources: (await source.records().catch(failed))
          .slice(-PAGE.default)
          .reverse()
          .map((r) => ({ uri: deliveryUri(r.id), name: nameOf(r), mimeType: 'text/plain' })),
      }),
    }),
    {
      title: 'One delivery',
      description: `One delivery whole: headers, body (cut at ${BODY.default} bytes, its size said), verification, your app's answer, its attempts.`,
      mimeType: 'text/plain',
    },
    async (uri, variables) => {
      const id = Number(variables.id);
      const found = Number.isInteger(id) && id > 0 ? await source.one(id).catch(failed) : undefined;
      if (!found) throw new McpError(ErrorCode.InvalidParams, `No delivery ${String(variables.id)} is kept (list the resources, or call list_deliveries, for what is).`);
      return json(uri.href, wholeDelivery(found.record, found.attempts, BODY.default));
    },
  );

  const subscribed = new Set<string>();
  let stop: (() => void) | undefined;
  /** Each delivery subscribed to, by the Trigger-Id its attempts share. */
  const triggers = new Map<string, string>();
  // what changed is told once per NOTIFY_MS at most, whatever the rate of deliveries
  const changed = new Set<string>();
  let scheduled = false;
  const arrived = (r: Listed) => {
    for (const uri of [LIST_URI, ...(r.replay_of !== undefined ? [deliveryUri(r.replay_of)] : []), ...(r.trigger_id && triggers.has(r.trigger_id) ? [triggers.get(r.trigger_id)!] : [])]) {
      if (subscribed.has(uri)) changed.add(uri);
    }
    if (scheduled) return;
    scheduled = true;
    setTimeout(() => {
      scheduled = false;
      for (const uri of changed) void server.server.sendResourceUpdated({ uri }).catch(() => undefined);
      if (changed.has(LIST_URI)) server.sendResourceListChanged();
      changed.clear();
    }, NOTIFY_MS);
  };
  server.server.registerCapabilities({ resources: { subscribe: true, listChanged: true } });
  server.server.setRequestHandler(SubscribeRequestSchema, async (request) => {
    const uri = request.params.uri;
    const one = /^wxhooks:\/\/deliveries\/(\d+)$/.exec(uri);
    if (uri !== LIST_URI && !one) throw new McpError(ErrorCode.InvalidParams, `There is no resource ${uri} to subscribe to: ${LIST_URI}, or ${LIST_URI}/ID.`);
    if (one) {
      const found = await source.one(Number(one[1])).catch(failed);
      if (!found) throw new McpError(ErrorCode.InvalidParams, `No delivery ${one[1]} is kept.`);
      if (found.record.trigger_id) triggers.set(found.record.trigger_id, uri);
    }
    subscribed.add(uri);
    stop ??= source.watch(arrived);
    m.log(`subscribed to ${uri}`);
    return {};
  });
  server.server.setRequestHandler(UnsubscribeRequestSchema, async (request) => {
    subscribed.delete(request.params.uri);
    for (const [trigger, uri] of triggers) if (uri === request.params.uri) triggers.delete(trigger);
    if (!subscribed.size) {
      stop?.();
      stop = undefined;
    }
    return {};
  });
}

/** An error of the attachment (the listen away, the store unreachable), for a resource: its message, redacted. */
function failed(err: unknown): never {
  throw new McpError(ErrorCode.InternalError, redact(err instanceof Error ? err.message : String(err)));
}
