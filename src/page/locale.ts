// Runs before uPlot, which formats numbers in the browser's language as it loads: a language Intl
// refuses (a POSIX locale reaches Chromium as "en-US@posix") would stop the whole page. Such a
// language is taken as en-US.
try {
  new Intl.NumberFormat(navigator.language);
} catch {
  Object.defineProperty(navigator, 'language', { value: 'en-US', configurable: true });
}
export {};
