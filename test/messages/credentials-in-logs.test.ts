import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApplication } from '../../src/apps/applications.js';
import { closeDeps, createDeps, type Deps } from '../../src/deps.js';
import { eventually, SAMPLE_SECRETS, sampleConfigs } from '../helpers/connections.js';
import { createTestEnv, freePort, spawnService, type ChildService, type TestEnv } from '../helpers/stack.js';
import { SmtpFake } from '../fakes/email.js';
import { TelegramFake } from '../fakes/telegram.js';
import { TwilioFake } from '../fakes/sms.js';
import { WhatsappFake } from '../fakes/whatsapp.js';
import { apiFetch } from '../helpers/openapi-contract.js';

// The web and worker processes as an operator runs them, logging everything (trace), while
// sends succeed, are refused for bad credentials, hit 5xx and unreachable platforms.
let t: TestEnv;
let deps: Deps;
let web: ChildService;
let worker: ChildService;
let base: string;
let headers: Record<string, string>;
let tg: TelegramFake;
let wa: WhatsappFake;
let sms: TwilioFake;
let smtp: SmtpFake;
const responses: string[] = [];

beforeAll(async () => {
  [tg, wa, sms, smtp] = await Promise.all([
    TelegramFake.start(),
    WhatsappFake.start({ accessToken: 'SECRET-wa-access' }),
    TwilioFake.start({ authToken: 'another-token' }),
    SmtpFake.start({ users: { mailer: 'other-pass' } }),
  ]);
  const port = await freePort();
  t = await createTestEnv({ LOG_LEVEL: 'trace', PORT: String(port), SEND_WAIT_MS: '4000' });
  deps = createDeps(t.config);
  web = spawnService('src/web.ts', t.env);
  worker = spawnService('workers/index.ts', t.env);
  await Promise.all([web.waitFor(/web listening/), worker.waitFor(/workers started/)]);
  const app = await createApplication(deps.sql, 'logs', ['admin', 'events:write', 'events:read']);
  headers = { Authorization: `Bearer ${app.apiKey}`, 'X-Service-App-ID': app.appId, 'Content-Type': 'application/json' };
  base = `http://127.0.0.1:${port}`;
});
afterAll(async () => {
  web?.kill('SIGKILL');
  worker?.kill('SIGKILL');
  await closeDeps(deps);
  await t.dropDatabase();
  await Promise.all([tg.close(), wa.close(), sms.close(), smtp.close()]);
});

async function call(method: string, path: string, body?: unknown) {
  const r = await apiFetch(base + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await r.text();
  responses.push(text);
  return { status: r.status, json: JSON.parse(text || 'null') };
}

describe('credentials', () => {
  it('never appear in a response or a log line, whatever happens to the sends', async () => {
    const configs = sampleConfigs({ TELEGRAM: tg.url, WHATSAPP: wa.url, SMS: sms.url, EMAIL: `smtp://127.0.0.1:${smtp.port}` });
    const ids: Record<string, string> = {};
    for (const p of ['TELEGRAM', 'WHATSAPP', 'SMS', 'EMAIL']) {
      const r = await call('POST', '/v1/platform-connections', { platform_name: p, name: p, config: configs[p] });
      expect(r.status, JSON.stringify(r.json)).toBe(201);
      ids[p] = r.json.id;
    }
    // An inbound delivery to the Telegram connection's own URL: its secret is part of the path.
    const tgConn = await call('GET', `/v1/platform-connections/${ids.TELEGRAM}`);
    const hookPath = new URL(tgConn.json.webhook_url).pathname;
    const hook = await fetch(base + hookPath, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-telegram-bot-api-secret-token': String(configs.TELEGRAM.secret_token) },
      body: JSON.stringify({
        update_id: 1,
        message: {
          message_id: 1,
          from: { id: 42, is_bot: false, first_name: 'Ann' },
          chat: { id: 42, type: 'private' },
          date: 1700000000,
          text: 'hi',
        },
      }),
    });
    expect(hook.status).toBe(200);
    const hookSecret = hookPath.split('/').pop()!;
    const dead = await call('POST', '/v1/platform-connections', {
      platform_name: 'TELEGRAM',
      name: 'dead',
      config: { ...configs.TELEGRAM, api_base_url: 'http://127.0.0.1:1' },
    });
    await call('GET', '/v1/platform-connections');
    await call('GET', `/v1/platform-connections/${ids.TELEGRAM}`);
    await call('PATCH', `/v1/platform-connections/${ids.TELEGRAM}`, { name: 'renamed' });

    tg.server.script(1, { status: 500, body: 'oops' });
    const sends = await Promise.all([
      call('POST', '/v1/messages', { platform_connection_id: ids.TELEGRAM, to_external_id: '42', message: 'ok after a 500' }),
      call('POST', '/v1/messages', { platform_connection_id: ids.WHATSAPP, to_external_id: '+16505550100', message: 'ok' }),
      // Twilio and SMTP refuse these credentials; the dead connection cannot be reached.
      call('POST', '/v1/messages', { platform_connection_id: ids.SMS, to_external_id: '+14155550100', message: 'refused' }),
      call('POST', '/v1/messages', { platform_connection_id: ids.EMAIL, to_external_id: 'a@example.org', message: 'refused' }),
      call('POST', '/v1/messages', { platform_connection_id: dead.json.id, to_external_id: '42', message: 'unreachable' }),
    ]);
    expect(sends.map((s) => s.status)).toEqual([201, 201, 422, 422, 202]);
    expect(sends[2].json.error.code).toBe('PLATFORM_AUTH_FAILED');
    expect(sends[3].json.error.code).toBe('PLATFORM_AUTH_FAILED');
    // The unreachable one has been retried and logged at least once by now.
    await eventually(async () => /job failed/.test(worker.output()) || undefined, 10_000, 'a logged retry');

    const logs = web.output() + worker.output();
    expect(logs).toContain('"level":20'); // debug lines (every request) were written: the check below read real logs
    expect(logs).toContain('/webhooks/');
    for (const secret of [...SAMPLE_SECRETS, 'mailer:', hookSecret]) expect(logs, `log contains ${secret}`).not.toContain(secret);
    // Responses: the connection's own webhook_url is the one place its URL secret is shown.
    for (const secret of [...SAMPLE_SECRETS, 'mailer:']) for (const body of responses) expect(body).not.toContain(secret);
  });
});
