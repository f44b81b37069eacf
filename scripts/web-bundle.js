// How wxhooks/web is bundled (esbuild's options, without where it is written): read by scripts/bundle.js,
// which writes dist/web.js, and by test/web-size.test.ts, which holds its size to a ceiling, so the test
// measures what the build makes.
// - one file, no Node module: esbuild's neutral platform fails the build on a node: import;
// - @opentelemetry/api imported, not bundled: it is one copy per app (an SDK the app registers must be the
//   API the handler asks), and an app's bundler or runtime brings it from wxhooks' dependencies;
// - class fields assigned in the constructor, as TypeScript does below ES2022, rather than also declared
//   (`errors; event;` after each class for its parameter properties): −108 B of its 13.1 KB min+gzip. No
//   class on its path depends on the difference (no field shadows an accessor or is redeclared by a subclass).
export const WEB_BUNDLE = {
  entryPoints: [new URL('../src/handler/web.ts', import.meta.url).pathname],
  bundle: true,
  external: ['@opentelemetry/api'],
  format: 'esm',
  platform: 'neutral',
  target: 'es2022',
  tsconfigRaw: { compilerOptions: { useDefineForClassFields: false } },
};
