import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PLATFORM_NAMES } from '../../src/platforms/types.js';
import { connect, SAMPLE_SECRETS, sampleConfigs } from '../helpers/connections.js';
import { startTestStack, type AppCredentials, type TestStack, type TestResponse } from '../helpers/stack.js';

let s: TestStack;
let a: AppCredentials;
let b: AppCredentials;
const seen: TestResponse[] = [];

beforeAll(async () => {
  s = await startTestStack({ workers: false, env: { PUBLIC_BASE_URL: 'https://gw.example.com' } });
  a = await s.createApp();
  b = await s.createApp();
});
afterAll(async () => {
  // No response of this file ever carried a credential.
  for (const r of seen) for (const secret of SAMPLE_SECRETS) expect(r.text).not.toContain(secret);
  await s.close();
});

async function req(method: string, path: string, auth: AppCredentials, body?: unknown) {
  const r = await s.request(method, path, { auth, body });
  seen.push(r);
  return r;
}
async function gql(auth: AppCredentials, query: string, variables?: Record<string, unknown>) {
  const r = await s.gql(auth, query, variables);
  seen.push(r);
  return r;
}

describe('platform connections over REST', () => {
  it.each(PLATFORM_NAMES)('%s: creates with a validated config, masks secrets, gives the inbound URL', async (platform) => {
    const config = sampleConfigs()[platform];
    const r = await req('POST', '/v1/platform-connections', a, { platform_name: platform, name: `my ${platform}`, config });
    expect(r.status, r.text).toBe(201);
    const secretKeys = Object.keys(config).filter((k) => String(config[k]).includes('SECRET'));
    for (const k of Object.keys(config)) expect(r.json.config[k]).toBe(secretKeys.includes(k) ? '********' : config[k]);
    expect(r.json).toMatchObject({
      platform_name: platform,
      name: `my ${platform}`,
      status: 'ACTIVE',
      health: { status: 'unknown', consecutive_failures: 0 },
    });
    const shared = ['WHATSAPP', 'MESSENGER', 'INSTAGRAM'].includes(platform);
    expect(r.json.webhook_url).toMatch(/^https:\/\/gw\.example\.com\/webhooks\/[0-9a-f-]{36}\/[A-Za-z0-9_-]{20,}$/);
    if (!shared) expect(r.json.webhook_url).toContain(`/webhooks/${r.json.id}/`);
    else expect(r.json.webhook_url).not.toContain(r.json.id);

    // Encrypted at rest: the row holds no secret in clear, only in the sealed column.
    const [row] = await s.deps.sql<
      { config_sealed: string; config_public: Record<string, unknown> }[]
    >`SELECT config_sealed, config_public FROM platform_connections WHERE id = ${r.json.id}`;
    const rowText = JSON.stringify(row);
    for (const k of secretKeys) {
      expect(rowText).not.toContain(String(config[k]));
      expect(row.config_public[k]).toBeUndefined();
    }
    expect(row.config_sealed).toMatch(/^v1:/);
    expect(JSON.parse(s.deps.secrets.open(row.config_sealed))).toEqual(Object.fromEntries(secretKeys.map((k) => [k, config[k]])));
  });

  it('gives the Meta-family platforms one shared URL and every other connection its own', async () => {
    const wa1 = await connect(s, a, 'WHATSAPP', { ...sampleConfigs().WHATSAPP, phone_number_id: '1055101' });
    const wa2 = await connect(s, b, 'WHATSAPP', { ...sampleConfigs().WHATSAPP, phone_number_id: '1055102' });
    expect(wa1.webhook_url).toBe(wa2.webhook_url);
    const t1 = await connect(s, a, 'TELEGRAM', sampleConfigs().TELEGRAM);
    const t2 = await connect(s, a, 'TELEGRAM', sampleConfigs().TELEGRAM);
    expect(t1.webhook_url).not.toBe(t2.webhook_url);
  });

  it.each([
    ['TELEGRAM', {}, ['config', 'bot_token']],
    ['TELEGRAM', { bot_token: 'not-a-token' }, ['config', 'bot_token']],
    ['WHATSAPP', { ...sampleConfigs().WHATSAPP, phone_number_id: undefined }, ['config', 'phone_number_id']],
    ['MESSENGER', { ...sampleConfigs().MESSENGER, verify_token: '' }, ['config', 'verify_token']],
    ['INSTAGRAM', { ...sampleConfigs().INSTAGRAM, ig_account_id: 'abc' }, ['config', 'ig_account_id']],
    ['SLACK', { bot_token: 'xoxp-user-token', signing_secret: 's' }, ['config', 'bot_token']],
    ['DISCORD', { ...sampleConfigs().DISCORD, public_key: 'xyz' }, ['config', 'public_key']],
    ['SMS', { account_sid: `AC${'a1'.repeat(16)}`, auth_token: 't' }, ['config', 'from']],
    ['EMAIL', { smtp_url: 'https://mail.example.com', from: 'a@b.co' }, ['config', 'smtp_url']],
    ['TELEGRAM', { ...sampleConfigs().TELEGRAM, api_base_url: 'not a url' }, ['config', 'api_base_url']],
    ['TELEGRAM', { ...sampleConfigs().TELEGRAM, unknown_field: 1 }, ['config', 'unknown_field']],
  ] as const)('%s: refuses an invalid config %j with VALIDATION_ERROR at %j, writing nothing', async (platform, config, path) => {
    const before = await s.deps.sql`SELECT count(*)::int AS n FROM platform_connections`;
    const r = await req('POST', '/v1/platform-connections', a, { platform_name: platform, name: 'bad', config });
    expect(r.status, r.text).toBe(400);
    expect(r.json.error.code).toBe('VALIDATION_ERROR');
    expect(r.json.error.details.map((d: { path: unknown[] }) => d.path)).toContainEqual(path);
    const after = await s.deps.sql`SELECT count(*)::int AS n FROM platform_connections`;
    expect(after[0].n).toBe(before[0].n);
  });

  it('refuses an unknown platform and a missing name', async () => {
    expect(
      (await req('POST', '/v1/platform-connections', a, { platform_name: 'FAX', name: 'x', config: {} })).json.error.details[0].path,
    ).toEqual(['platform_name']);
    expect(
      (await req('POST', '/v1/platform-connections', a, { platform_name: 'TELEGRAM', config: sampleConfigs().TELEGRAM })).json.error
        .details[0].path,
    ).toEqual(['name']);
  });

  it('lists, reads, renames, disables, changes config keeping omitted secrets, deletes — all scoped to the application', async () => {
    const c = await connect(s, a, 'SLACK', sampleConfigs().SLACK, 'workspace');
    const list = await req('GET', '/v1/platform-connections', a);
    expect(list.json.data.map((x: { id: string }) => x.id)).toContain(c.id);
    expect((await req('GET', '/v1/platform-connections', b)).json.data.map((x: { id: string }) => x.id)).not.toContain(c.id);

    const patched = await req('PATCH', `/v1/platform-connections/${c.id}`, a, {
      name: 'renamed',
      status: 'DISABLED',
      config: { bot_user_id: 'U0BOT1234' },
    });
    expect(patched.status, patched.text).toBe(200);
    expect(patched.json).toMatchObject({
      name: 'renamed',
      status: 'DISABLED',
      config: { bot_user_id: 'U0BOT1234', bot_token: '********', signing_secret: '********' },
    });
    const [row] = await s.deps.sql<{ config_sealed: string }[]>`SELECT config_sealed FROM platform_connections WHERE id = ${c.id}`;
    expect(JSON.parse(s.deps.secrets.open(row.config_sealed))).toEqual({
      bot_token: sampleConfigs().SLACK.bot_token,
      signing_secret: sampleConfigs().SLACK.signing_secret,
    });

    const badPatch = await req('PATCH', `/v1/platform-connections/${c.id}`, a, { config: { bot_token: 'xoxp-nope' } });
    expect(badPatch.status).toBe(400);
    expect(badPatch.json.error.details[0].path).toEqual(['config', 'bot_token']);

    for (const [method, body] of [
      ['GET', undefined],
      ['PATCH', { name: 'stolen' }],
      ['DELETE', undefined],
    ] as const) {
      const r = await req(method, `/v1/platform-connections/${c.id}`, b, body);
      expect(r.status).toBe(404);
      expect(r.json.error.code).toBe('PLATFORM_CONNECTION_NOT_FOUND');
    }
    expect((await req('GET', `/v1/platform-connections/${c.id}`, a)).json.name).toBe('renamed');
    expect((await req('DELETE', `/v1/platform-connections/${c.id}`, a)).status).toBe(204);
    expect((await req('GET', `/v1/platform-connections/${c.id}`, a)).status).toBe(404);
    expect((await req('GET', '/v1/platform-connections/not-a-uuid', a)).status).toBe(404);
  });

  it('needs the admin scope', async () => {
    const writer = await s.createKey(a.appId, ['events:write', 'events:read']);
    expect((await req('GET', '/v1/platform-connections', writer)).status).toBe(403);
    expect(
      (await req('POST', '/v1/platform-connections', writer, { platform_name: 'TELEGRAM', name: 'x', config: sampleConfigs().TELEGRAM }))
        .status,
    ).toBe(403);
  });
});

describe('platform connections over GraphQL', () => {
  it('createPlatformConnection answers id and webhookUrl; platformConnections lists it with masked config', async () => {
    const r = await gql(
      a,
      `mutation($c: JSON!) { createPlatformConnection(platformName: TELEGRAM, name: "gql bot", config: $c) { id webhookUrl } }`,
      { c: sampleConfigs().TELEGRAM },
    );
    expect(r.json.errors).toBeUndefined();
    const { id, webhookUrl } = r.json.data.createPlatformConnection;
    expect(webhookUrl).toBe(`https://gw.example.com/webhooks/${id}/${webhookUrl.split('/').pop()}`);
    const list = await gql(
      a,
      `{ platformConnections { id name platformName config webhookUrl status health { status consecutiveFailures } } }`,
    );
    const mine = list.json.data.platformConnections.find((c: { id: string }) => c.id === id);
    expect(mine).toMatchObject({
      name: 'gql bot',
      platformName: 'TELEGRAM',
      config: { bot_token: '********', secret_token: '********' },
      status: 'ACTIVE',
      health: { status: 'UNKNOWN', consecutiveFailures: 0 },
    });
    const other = await gql(b, `{ platformConnections { id } }`);
    expect(other.json.data.platformConnections.map((c: { id: string }) => c.id)).not.toContain(id);
  });

  it('validates config with VALIDATION_ERROR and the failing path', async () => {
    const r = await gql(a, `mutation { createPlatformConnection(platformName: SMS, name: "x", config: {account_sid: "nope"}) { id } }`);
    expect(r.json.errors[0].extensions.code).toBe('VALIDATION_ERROR');
    expect(r.json.errors[0].extensions.path).toEqual(['config', 'account_sid']);
  });

  it('updatePlatformConnection and deletePlatformConnection, scoped to the application', async () => {
    const c = await connect(s, a, 'DISCORD', { ...sampleConfigs().DISCORD, application_id: '998877665544330146' });
    const stolen = await gql(b, `mutation($id: ID!) { updatePlatformConnection(id: $id, name: "mine now") { id } }`, { id: c.id });
    expect(stolen.json.errors[0].extensions.code).toBe('PLATFORM_CONNECTION_NOT_FOUND');
    const u = await gql(
      a,
      `mutation($id: ID!) { updatePlatformConnection(id: $id, name: "guild", status: DISABLED) { id name status config } }`,
      { id: c.id },
    );
    expect(u.json.data.updatePlatformConnection).toMatchObject({
      name: 'guild',
      status: 'DISABLED',
      config: { bot_token: '********', public_key: 'ab'.repeat(32) },
    });
    expect((await gql(b, `mutation($id: ID!) { deletePlatformConnection(id: $id) }`, { id: c.id })).json.errors[0].extensions.code).toBe(
      'PLATFORM_CONNECTION_NOT_FOUND',
    );
    expect(
      (await gql(a, `mutation($id: ID!) { deletePlatformConnection(id: $id) }`, { id: c.id })).json.data.deletePlatformConnection,
    ).toBe(true);
    expect((await req('GET', `/v1/platform-connections/${c.id}`, a)).status).toBe(404);
  });

  it('needs the admin scope', async () => {
    const writer = await s.createKey(a.appId, ['events:write']);
    const r = await gql(writer, `{ platformConnections { id } }`);
    expect(r.json.errors[0].extensions.code).toBe('FORBIDDEN');
  });
});

describe('GET /v1/platforms', () => {
  it('lists every platform with the JSON Schema of its config and its write-only fields', async () => {
    const r = await req('GET', '/v1/platforms', a);
    expect(r.status).toBe(200);
    expect(r.json.data.map((p: { name: string }) => p.name)).toEqual([...PLATFORM_NAMES]);
    const telegram = r.json.data.find((p: { name: string }) => p.name === 'TELEGRAM');
    expect(telegram.config_schema.type).toBe('object');
    expect(telegram.config_schema.required).toContain('bot_token');
    expect(telegram.secret_fields).toContain('bot_token');
    const reader = await s.createKey(a.appId, ['events:read']);
    expect((await req('GET', '/v1/platforms', reader)).status).toBe(403);
  });
});
