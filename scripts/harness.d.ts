export function freePort(): Promise<number>;
export function eachLine(stream: NodeJS.ReadableStream, onLine: (line: string) => void): void;
