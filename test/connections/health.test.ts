import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as P from '../fakes/inbound/payloads.js';
import { telegramHeaders } from '../fakes/inbound/signers.js';
import { startTestStack, type AppCredentials, type TestStack } from '../helpers/stack.js';
import { connect, eventually, postWebhook } from '../inbound/helpers.js';

let s: TestStack;
let app: AppCredentials;
beforeAll(async () => {
  s = await startTestStack({ workers: ['inbound', 'ledger'] });
  app = await s.createApp();
});
afterAll(() => s.close());

const healthOf = async (id: string) => (await s.request('GET', `/v1/platform-connections/${id}`, { auth: app })).json.health;

describe('connection health', () => {
  it('shows when the platform last delivered to the connection, in REST and GraphQL', async () => {
    const tg = await connect(s, app, 'TELEGRAM', { bot_token: '13579:health-bot' });
    expect((await healthOf(tg.id)).last_inbound_at).toBeNull();
    const before = Date.now();
    expect((await postWebhook(s, tg.path, JSON.stringify(P.tgText(1, 31, 'hello')), telegramHeaders())).status).toBe(200);
    const at = await eventually(async () => (await healthOf(tg.id)).last_inbound_at ?? undefined, 10_000, 'last_inbound_at');
    expect(Date.parse(at)).toBeGreaterThanOrEqual(before - 1000);
    expect(Date.parse(at)).toBeLessThanOrEqual(Date.now());
    const list = await s.request('GET', '/v1/platform-connections', { auth: app });
    expect(list.json.data.find((c: { id: string }) => c.id === tg.id).health.last_inbound_at).toBe(at);
    const gql = await s.gql(app, '{ platformConnections { id health { lastInboundAt } } }');
    expect(gql.json.data.platformConnections.find((c: { id: string }) => c.id === tg.id).health.lastInboundAt).toBe(at);
  });
});
