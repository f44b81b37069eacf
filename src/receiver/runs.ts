// The model-run rules live in the core (src/delivery/runs.ts), import-free, shared with the page.
export * from '../delivery/runs.js';
