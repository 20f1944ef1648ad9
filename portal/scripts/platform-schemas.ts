/**
 * Writes each platform's connection config as JSON Schema for the portal's "new connection"
 * form, from the same zod schemas the service validates with (src/platforms/<name>/config.ts),
 * so the form cannot drift from what the API accepts. Secret fields are marked `writeOnly`.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import { ADAPTERS } from '../../src/platforms/registry.js';

const out = join(dirname(fileURLToPath(import.meta.url)), '../src/generated/platform-schemas.json');

const schemas = Object.fromEntries(
  Object.values(ADAPTERS).map((adapter) => {
    const schema = z.toJSONSchema(adapter.configSchema, { io: 'input', unrepresentable: 'any' }) as {
      properties?: Record<string, Record<string, unknown>>;
    };
    for (const field of adapter.secretFields) {
      const property = schema.properties?.[field];
      if (property) property.writeOnly = true;
    }
    return [adapter.name, schema];
  }),
);

mkdirSync(dirname(out), { recursive: true });
writeFileSync(out, `${JSON.stringify(schemas, null, 2)}\n`);
