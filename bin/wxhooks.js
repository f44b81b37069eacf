#!/usr/bin/env node
import { run } from '../dist/bin/cli.js';

await run();
