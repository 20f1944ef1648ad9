/**
 * Writes the OpenAPI document the web process serves (src/http/offline-document.ts: built from
 * the route declarations, no database, Redis or server) to the path given, or to stdout.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { offlineOpenApiDocument } from '../src/http/offline-document.js';

const json = `${JSON.stringify(offlineOpenApiDocument(), null, 2)}\n`;
const out = process.argv[2];
if (!out) process.stdout.write(json);
else {
  mkdirSync(dirname(out), { recursive: true });
  writeFileSync(out, json);
}
