import type { z } from 'zod';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { OutboundProtocol } from '../../src/net/outbound-policy.js';
import { configKeys } from '../../src/platforms/platform-docs.js';
import { ADAPTERS } from '../../src/platforms/registry.js';
import { PLATFORM_NAMES, type PlatformName } from '../../src/platforms/types.js';
import { SAMPLE_RECIPIENTS, sampleConfigs } from '../helpers/connections.js';
import { startTestStack, type AppCredentials, type TestStack } from '../helpers/stack.js';
import { ADDRESS_FORMS, startListener, type Listener } from './ssrf-corpus.js';

/**
 * Every connection-config field naming a server is covered by the outbound rule
 * (src/net/outbound-policy.ts): the fields are read from the platforms' config schemas, so a
 * field added later without being declared in its adapter's `addressFields` fails here, and
 * each declared field gets the whole address corpus when written and when connected to.
 */

/** Config keys whose name says they hold a server's address, whatever their schema says. */
const ADDRESS_NAME = /url|uri|host|server|endpoint|domain|proxy|base|addr/i;

/** Keys that look like addresses but are never connected to, each with the reason. None so far. */
const NOT_CONNECTED_TO: Partial<Record<PlatformName, Record<string, string>>> = {};

const ADDRESS_FIELDS = PLATFORM_NAMES.flatMap((platform) =>
  Object.entries(ADAPTERS[platform].addressFields).map(([field, protocol]) => ({ platform, field, protocol })),
);

/** A URL of the field's protocol to `host`:`port` (under `public-https`, http fields take https). */
const urlTo = (protocol: OutboundProtocol, host: string, port: number) =>
  protocol === 'http' ? `https://${host}:${port}/` : `smtp://mailer:pw@${host}:${port}`;

/** A valid config for each platform, with no address a public-https policy would refuse. */
function publicConfig(platform: PlatformName): Record<string, unknown> {
  const config = sampleConfigs()[platform];
  return platform === 'EMAIL' ? { ...config, smtp_url: 'smtp://mailer:pw@smtp.example.com:587' } : config;
}

describe('which config fields the outbound rule covers', () => {
  it.each(PLATFORM_NAMES)('%s: every config key holding a URL or host is one of its address fields', (platform) => {
    const holding = configKeys(platform)
      .filter((k) => k.format === 'uri' || ADDRESS_NAME.test(k.key))
      .map((k) => k.key)
      .filter((key) => !NOT_CONNECTED_TO[platform]?.[key]);
    expect(Object.keys(ADAPTERS[platform].addressFields).sort(), `${platform} config keys holding an address`).toEqual(holding.sort());
  });

  it('covers at least every api_base_url and the SMTP server', () => {
    const covered = ADDRESS_FIELDS.map((f) => `${f.platform}.${f.field}`);
    // The sandbox calls no API, so it has no address to override.
    for (const p of PLATFORM_NAMES.filter((p) => p !== 'SANDBOX')) expect(covered).toContain(`${p}.api_base_url`);
    expect(covered).toContain('EMAIL.smtp_url');
  });

  it.each(ADDRESS_FIELDS)('$platform $field is judged as the $protocol URLs its schema stores', ({ platform, field, protocol }) => {
    const shape = (ADAPTERS[platform].configSchema as unknown as z.ZodObject).shape;
    const other: OutboundProtocol = protocol === 'http' ? 'smtp' : 'http';
    expect(shape[field].safeParse(urlTo(protocol, 'example.com', 443)).success).toBe(true);
    expect(shape[field].safeParse(urlTo(other, 'example.com', 443)).success).toBe(false);
  });
});

describe('every address field under public-https', () => {
  let s: TestStack;
  let a: AppCredentials;
  let listener: Listener;
  const ids: Partial<Record<PlatformName, string>> = {};
  beforeAll(async () => {
    listener = await startListener();
    s = await startTestStack({
      workers: false,
      env: { OUTBOUND_ADDRESS_POLICY: 'public-https', WEBHOOK_TARGET_POLICY: '', RATE_LIMIT_PER_MINUTE: '100000' },
    });
    a = await s.createApp();
    for (const platform of PLATFORM_NAMES) {
      const r = await s.request('POST', '/v1/platform-connections', {
        auth: a,
        body: { platform_name: platform, name: 'public', config: publicConfig(platform) },
      });
      expect(r.status, r.text).toBe(201);
      ids[platform] = r.json.id;
    }
  });
  afterAll(async () => {
    await s?.close();
    await listener?.close();
  });

  it.each(ADDRESS_FIELDS)(
    '$platform $field: every address literal is refused with 400 naming the field, on create and update',
    async ({ platform, field, protocol }) => {
      for (const form of ADDRESS_FORMS.filter((f) => f.literal)) {
        const url = urlTo(protocol, form.host, listener.port);
        const create = await s.request('POST', '/v1/platform-connections', {
          auth: a,
          body: { platform_name: platform, name: 'probe', config: { ...publicConfig(platform), [field]: url } },
        });
        const update = await s.request('PATCH', `/v1/platform-connections/${ids[platform]}`, {
          auth: a,
          body: { config: { [field]: url } },
        });
        for (const [how, r] of [
          ['create', create],
          ['update', update],
        ] as const) {
          expect(r.status, `${how} ${url} (${form.what}): ${r.text}`).toBe(400);
          expect(r.json.error, `${how} ${url}`).toMatchObject({
            code: 'VALIDATION_ERROR',
            details: [expect.objectContaining({ path: ['config', field] })],
          });
        }
      }
    },
  );

  it.each(ADDRESS_FIELDS)(
    '$platform $field: a stored config with any corpus host fails the send without connecting',
    async ({ platform, field, protocol }) => {
      for (const form of ADDRESS_FORMS) {
        const url = urlTo(protocol, form.host, listener.port);
        const out = await ADAPTERS[platform].send(
          { ...publicConfig(platform), [field]: url },
          { to: SAMPLE_RECIPIENTS[platform], text: 'probe' },
          { timeoutMs: 2_000, guarded: true },
        );
        expect(out, `${url} (${form.what})`).toMatchObject({
          ok: false,
          error: { code: 'PLATFORM_REJECTED', retryable: false, message: expect.stringMatching(/outbound address policy/) },
        });
        expect(listener.connections(), `${url} (${form.what}) reached the listener`).toBe(0);
      }
    },
  );
});
