import { isKnownType, RESPONSE_TYPES, SUBSCRIPTION_TYPES, suggestion } from '../vocabulary.js';

/**
 * What is said of the subscription and response types wxhooks does not know, which are sent anyway
 * (the service may know more): one sentence each, for the commands' warnings and the MCP tools' answers.
 */
export function unknownTypes(types: readonly string[], responses: readonly (string | null | undefined)[] = []): string[] {
  return [
    ...types.filter((t) => !isKnownType(t)).map((t) => `"${t}" is not a subscription type wxhooks knows (${suggestion(t, SUBSCRIPTION_TYPES)}); sending it anyway.`),
    ...responses
      .filter((r): r is string => typeof r === 'string' && !(RESPONSE_TYPES as readonly string[]).includes(r))
      .map((r) => `"${r}" is not a response type wxhooks knows (${suggestion(r, RESPONSE_TYPES)}); sending it anyway.`),
  ];
}
