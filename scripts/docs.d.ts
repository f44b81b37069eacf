export function commandPages(help: Record<string, string>, groups: readonly (readonly [string, string, unknown])[]): Map<string, string>;
export function readmeCommands(groups: readonly (readonly [string, string, unknown])[]): string;
export function withGenerated(text: string, name: string, content: string): string;
