import { z } from 'zod';
import { getAdapter } from '../platforms/registry.js';
import { PLATFORM_NAMES } from '../platforms/types.js';
import type { Api } from './api.js';

const platformOut = z.object({
  name: z.enum(PLATFORM_NAMES),
  config_schema: z.record(z.string(), z.unknown()).describe('JSON Schema of a connection config'),
  secret_fields: z.array(z.string()).describe('config fields that are write-only (masked on reads)'),
});

/** The platforms a connection can be made to, with what their config takes: a client builds its form from this. */
export function registerPlatformRoutes(api: Api): void {
  const platforms = PLATFORM_NAMES.map((name) => ({
    name,
    config_schema: z.toJSONSchema(getAdapter(name).configSchema, { io: 'input', unrepresentable: 'any' }),
    secret_fields: [...getAdapter(name).secretFields],
  }));
  api.route({
    method: 'get',
    path: '/v1/platforms',
    operationId: 'listPlatforms',
    description:
      "The platforms a connection can be made to, with the JSON Schema of each one's config and which of its fields are secrets: what POST /v1/platform-connections expects for each.",
    summary: 'The platforms connections can be made to, each with the JSON Schema of its config and its secret fields',
    scope: 'admin',
    responses: { 200: { description: 'Every platform', schema: z.object({ data: z.array(platformOut) }) } },
    handler: async () => ({ status: 200, body: { data: platforms } }),
  });
}
