import { createHash } from 'node:crypto';

/** The lasting channel of a webhook: the same for every `listen --relay --webhook ID` against one service. */
export function webhookChannel(webhook: string, baseUrl: string): string {
  const hash = createHash('sha256').update(baseUrl).digest('hex').slice(0, 8);
  const id = webhook.replace(/[^A-Za-z0-9_.-]/g, '_').slice(0, 64 - 'wh--'.length - hash.length);
  return `wh-${id}-${hash}`;
}
