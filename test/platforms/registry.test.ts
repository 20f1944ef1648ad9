import { readdirSync } from 'node:fs';
import type { GraphQLEnumType } from 'graphql';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { routingIdsOf, SHARED_WEBHOOK_PLATFORMS } from '../../src/connections/connections.js';
import { replyWindow } from '../../src/conversations/reply-window.js';
import { createSchema } from '../../src/graphql/schema.js';
import { Api } from '../../src/http/api.js';
import { registerConnectionRoutes } from '../../src/http/connections.js';
import { registerConversationRoutes } from '../../src/http/conversations.js';
import { documentOptions } from '../../src/http/openapi.js';
import { codeInMessage, deepLinksFor } from '../../src/identity/link-codes.js';
import { ADAPTERS, type Registry } from '../../src/platforms/registry.js';
import { PLATFORM_NAMES, REPLY_POLICIES, type PlatformAdapter, type PlatformName } from '../../src/platforms/types.js';

/** The members every adapter must have (the ones without `?`). */
type RequiredKeys<T> = { [K in keyof T]-?: object extends Pick<T, K> ? never : K }[keyof T];

const CAPABILITIES = [
  'name',
  'configSchema',
  'secretFields',
  'addressFields',
  'acceptsFiles',
  'checkRecipient',
  'send',
  'rateBudget',
  'replyPolicy',
  'systemExternalId',
  'routingFields',
  'verify',
  'dedupeKey',
  'normalise',
  'downloadMedia',
  'deepLink',
] as const satisfies readonly RequiredKeys<PlatformAdapter>[];

// A required member missing from CAPABILITIES makes this object need a property: the walk
// below then cannot fall behind the interface.
const unlisted: Record<Exclude<RequiredKeys<PlatformAdapter>, (typeof CAPABILITIES)[number]>, never> = {};

const platformsDir = new URL('../../src/platforms/', import.meta.url);
const folders = readdirSync(platformsDir, { withFileTypes: true })
  .filter((d) => d.isDirectory())
  .map((d) => d.name);

const configFields = (adapter: PlatformAdapter) =>
  Object.keys((z.toJSONSchema(adapter.configSchema, { io: 'input' }) as { properties?: object }).properties ?? {});

describe('the platform registry', () => {
  it('lists every platform name once, each adapter under its own name', () => {
    expect(Object.keys(ADAPTERS).sort()).toEqual([...PLATFORM_NAMES].sort());
    for (const name of PLATFORM_NAMES) expect(ADAPTERS[name].name).toBe(name);
    expect(unlisted).toEqual({});
  });

  it('has one folder per platform, whose adapter.ts exports the registered adapter', async () => {
    expect(folders.map((f) => f.toUpperCase()).sort()).toEqual([...PLATFORM_NAMES].sort());
    for (const folder of folders) {
      const mod = (await import(/* @vite-ignore */ new URL(`${folder}/adapter.ts`, platformsDir).pathname)) as Record<string, unknown>;
      expect(Object.values(mod), folder).toContain(ADAPTERS[folder.toUpperCase() as PlatformName]);
    }
  });

  describe.each(PLATFORM_NAMES)('%s', (name) => {
    const adapter = ADAPTERS[name];

    it('provides every capability', () => {
      for (const capability of CAPABILITIES) expect(adapter[capability], capability).toBeDefined();
      expect(typeof adapter.deepLink.url).toBe('function');
    });

    it('names only fields its config schema has (secrets, routing ids, addresses)', () => {
      const fields = configFields(adapter);
      for (const f of [...adapter.secretFields, ...adapter.routingFields, ...Object.keys(adapter.addressFields)])
        expect(fields).toContain(f);
      // Every platform with an API to call can be pointed elsewhere; the sandbox calls none.
      if (name === 'SANDBOX') expect(adapter.addressFields).toEqual({});
      else {
        expect(fields).toContain('api_base_url');
        expect(Object.keys(adapter.addressFields)).toContain('api_base_url');
      }
    });

    it('has positive send budgets', () => {
      for (const b of [adapter.rateBudget.connection, adapter.rateBudget.recipient]) {
        expect(b.rate).toBeGreaterThan(0);
        expect(b.perMs).toBeGreaterThan(0);
        expect(Number.isInteger(b.burst) && b.burst >= 0).toBe(true);
      }
    });

    it('answers with a known reply policy, a system id without config, and no deep link without a handle', () => {
      expect(REPLY_POLICIES).toContain(adapter.replyPolicy('12345'));
      expect(adapter.systemExternalId({})).toMatch(/./);
      expect(adapter.deepLink.url({}, 'K7QM4XPD')).toBeUndefined();
    });
  });

  it('does not compile a platform without a capability, nor a registry without a platform', () => {
    // These lines are checked by `tsc --noEmit`: each must stay a type error.
    const { deepLink: _dropped, ...withoutDeepLink } = ADAPTERS.SMS;
    // @ts-expect-error deepLink is a capability every platform states
    const adapter: PlatformAdapter = withoutDeepLink;
    const { EMAIL: _email, ...withoutEmail } = ADAPTERS;
    // @ts-expect-error every platform name needs its adapter
    const partial: Registry = withoutEmail;
    // @ts-expect-error each adapter sits under its own name
    const swapped: Registry = { ...ADAPTERS, SMS: ADAPTERS.EMAIL };
    expect([adapter, partial, swapped].every(Boolean)).toBe(true);
  });
});

describe('what each platform folder knows', () => {
  it('gives the connected account its external id, falling back when the config lacks it', () => {
    const ids = Object.fromEntries(PLATFORM_NAMES.map((n) => [n, ADAPTERS[n].systemExternalId({})]));
    expect(ids).toEqual({
      TELEGRAM: 'bot',
      WHATSAPP: 'whatsapp',
      MESSENGER: 'page',
      INSTAGRAM: 'instagram',
      SLACK: 'slack-bot',
      DISCORD: 'discord',
      SMS: 'sms',
      EMAIL: 'email',
      SANDBOX: 'sandbox',
    });
    expect(ADAPTERS.TELEGRAM.systemExternalId({ bot_token: '123456:ABC-def' })).toBe('123456');
    expect(ADAPTERS.WHATSAPP.systemExternalId({ phone_number_id: '111' })).toBe('111');
    expect(ADAPTERS.MESSENGER.systemExternalId({ page_id: '222' })).toBe('222');
    expect(ADAPTERS.INSTAGRAM.systemExternalId({ ig_account_id: '333', page_id: '222' })).toBe('333');
    expect(ADAPTERS.SLACK.systemExternalId({ bot_user_id: 'U1' })).toBe('U1');
    expect(ADAPTERS.DISCORD.systemExternalId({ application_id: '444' })).toBe('444');
    expect(ADAPTERS.SMS.systemExternalId({ messaging_service_sid: 'MG1' })).toBe('MG1');
    expect(ADAPTERS.SMS.systemExternalId({ from: '+15550100', messaging_service_sid: 'MG1' })).toBe('+15550100');
    expect(ADAPTERS.EMAIL.systemExternalId({ from: 'Help <help@example.com>' })).toBe('Help <help@example.com>');
  });

  it('claims the routing ids of the account a connection speaks for, one spelling per mailbox', () => {
    const config = {
      bot_token: '1:a',
      phone_number_id: '111',
      page_id: '222',
      ig_account_id: '333',
      bot_user_id: 'U1',
      application_id: '444',
      from: 'Help <Help@Example.com>',
      messaging_service_sid: 'MG1',
    };
    const ids = Object.fromEntries(PLATFORM_NAMES.map((n) => [n, routingIdsOf(n, config)]));
    expect(ids).toEqual({
      TELEGRAM: [],
      WHATSAPP: ['111'],
      MESSENGER: ['222'],
      INSTAGRAM: ['333', '222'],
      SLACK: ['U1'],
      DISCORD: ['444'],
      SMS: ['Help <Help@Example.com>', 'MG1'],
      EMAIL: ['help@example.com'],
      SANDBOX: [],
    });
  });

  it('shares one inbound URL exactly among the platforms routing payloads by account id', () => {
    expect([...SHARED_WEBHOOK_PLATFORMS].sort()).toEqual(['INSTAGRAM', 'MESSENGER', 'WHATSAPP']);
  });

  it('applies each platform reply rule', () => {
    const policies = Object.fromEntries(PLATFORM_NAMES.map((n) => [n, replyWindow(n, '12345', null).policy]));
    expect(policies).toEqual({
      TELEGRAM: 'user_must_start',
      WHATSAPP: 'window_24h',
      MESSENGER: 'window_24h',
      INSTAGRAM: 'window_24h',
      SLACK: 'none',
      DISCORD: 'none',
      SMS: 'none',
      EMAIL: 'none',
      SANDBOX: 'none',
    });
    expect(replyWindow('TELEGRAM', '-100123', null)).toMatchObject({ policy: 'none', open: true });
    expect(replyWindow('UNKNOWN', '1', null)).toMatchObject({ policy: 'none', open: true });
  });

  it('builds deep links only where the platform has them and the config gives the handle', () => {
    const config = {
      bot_username: '@acme_bot',
      display_phone_number: '+1 555 010 0200',
      from: '+15550100200',
      page_id: '1',
      bot_user_id: 'U1',
    };
    const conns = PLATFORM_NAMES.map((platform) => ({ id: platform, platform, config_public: config }));
    expect(deepLinksFor(conns, 'K7QM4XPD')).toEqual([
      { platform: 'telegram', platform_connection_id: 'TELEGRAM', url: 'https://t.me/acme_bot?start=K7QM4XPD' },
      { platform: 'whatsapp', platform_connection_id: 'WHATSAPP', url: 'https://wa.me/15550100200?text=K7QM4XPD' },
      { platform: 'sms', platform_connection_id: 'SMS', url: 'sms:+15550100200?body=K7QM4XPD' },
    ]);
    expect(deepLinksFor([{ id: 'x', platform: 'TELEGRAM', config_public: { bot_username: 'no' } }], 'K7QM4XPD')).toEqual([]);
    expect(codeInMessage('telegram', '/start k7qm4xpd')).toBe('K7QM4XPD');
    expect(codeInMessage('SMS', '/start K7QM4XPD')).toBeUndefined();
  });
});

describe('the API enums', () => {
  it('GraphQL PlatformName and ReplyWindowPolicy equal the registry keys and reply policies', () => {
    const schema = createSchema();
    const values = (type: string) => (schema.getType(type) as GraphQLEnumType).getValues().map((v) => v.name);
    expect(values('PlatformName')).toEqual([...PLATFORM_NAMES]);
    expect(values('PlatformName').sort()).toEqual(Object.keys(ADAPTERS).sort());
    expect(values('ReplyWindowPolicy')).toEqual(REPLY_POLICIES.map((p) => p.toUpperCase()));
  });

  it('OpenAPI platform_name (request and response) and reply policy equal the registry keys and reply policies', () => {
    const api = new Api(undefined as never, undefined as never);
    registerConnectionRoutes(api);
    registerConversationRoutes(api);
    type Schema = { properties: Record<string, { enum?: string[] } & Schema>; items?: Schema };
    const doc = api.openapi(documentOptions({ PUBLIC_BASE_URL: 'http://localhost', publicBaseUrlConfigured: false })) as {
      paths: Record<string, Record<string, { requestBody?: unknown; responses: Record<string, unknown> }>>;
    };
    const json = (x: unknown) => (x as { content: { 'application/json': { schema: Schema } } }).content['application/json'].schema;
    const create = doc.paths['/v1/platform-connections'].post;
    expect(json(create.requestBody).properties.platform_name.enum).toEqual(Object.keys(ADAPTERS));
    expect(json(create.responses['201']).properties.platform_name.enum).toEqual(Object.keys(ADAPTERS));
    const conversation = json(doc.paths['/v1/conversations/{id}'].get.responses['200']);
    expect(conversation.properties.reply_window.properties.policy.enum).toEqual([...REPLY_POLICIES]);
  });
});
