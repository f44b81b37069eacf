export function buildSea(dir?: string): Promise<string>;
