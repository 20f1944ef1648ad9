/**
 * Writes each broker destination kind's REST input as JSON Schema for the portal's webhook
 * form, from the same zod schemas the service validates with (src/destinations/<kind>/config.ts),
 * so the form asks for exactly what the API accepts and a kind added to the registry gets its
 * fields without a portal change. `url` is the sealed part (src/destinations/types.ts).
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import { DESTINATIONS } from '../../src/destinations/registry.js';

const out = join(dirname(fileURLToPath(import.meta.url)), '../src/generated/destination-schemas.json');

const schemas = Object.fromEntries(
  Object.values(DESTINATIONS).map((adapter) => [adapter.kind, z.toJSONSchema(adapter.input, { io: 'input', unrepresentable: 'any' })]),
);

mkdirSync(dirname(out), { recursive: true });
writeFileSync(out, `${JSON.stringify(schemas, null, 2)}\n`);
