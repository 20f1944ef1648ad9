import { expect } from 'vitest';
import type { AppCredentials, TestStack } from './stack.js';

/** Creates a platform connection over REST and returns its public form (fails the test on anything but 201). */
export async function connect(
  s: TestStack,
  auth: AppCredentials,
  platform: string,
  config: Record<string, unknown>,
  name = `${platform.toLowerCase()} test`,
) {
  const r = await s.request('POST', '/v1/platform-connections', { auth, body: { platform_name: platform, name, config } });
  expect(r.status, r.text).toBe(201);
  return r.json as { id: string; webhook_url: string; config: Record<string, unknown>; health: { status: string } };
}

/** Polls `fn` until it returns something truthy, or fails after `timeoutMs`. */
export async function eventually<T>(fn: () => Promise<T | undefined | false | null>, timeoutMs = 10_000, what = 'condition'): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/**
 * A valid config per platform, with distinctive secret values (so a test can search every
 * response for them) and `api_base_url` pointing wherever the caller says.
 */
export function sampleConfigs(base: Partial<Record<string, string>> = {}): Record<string, Record<string, unknown>> {
  const url = (p: string) => (base[p] ? { api_base_url: base[p] } : {});
  return {
    TELEGRAM: { bot_token: '555001:SECRET-telegram-bot-token', secret_token: 'SECRET-telegram-hook', ...url('TELEGRAM') },
    WHATSAPP: {
      access_token: 'SECRET-wa-access',
      phone_number_id: '1055001',
      business_account_id: '2077001',
      app_secret: 'SECRET-wa-app',
      verify_token: 'SECRET-wa-verify',
      ...url('WHATSAPP'),
    },
    MESSENGER: {
      page_access_token: 'SECRET-fb-page',
      page_id: '3001001',
      app_secret: 'SECRET-fb-app',
      verify_token: 'SECRET-fb-verify',
      ...url('MESSENGER'),
    },
    INSTAGRAM: {
      page_access_token: 'SECRET-ig-page',
      ig_account_id: '17841401',
      app_secret: 'SECRET-ig-app',
      verify_token: 'SECRET-ig-verify',
      ...url('INSTAGRAM'),
    },
    SLACK: { bot_token: 'xoxb-SECRET-slack-bot', signing_secret: 'SECRET-slack-signing', ...url('SLACK') },
    DISCORD: { bot_token: 'SECRET-discord-bot', application_id: '998877665544332211', public_key: 'ab'.repeat(32), ...url('DISCORD') },
    SMS: { account_sid: `AC${'a1'.repeat(16)}`, auth_token: 'SECRET-twilio-auth', from: '+15005550006', ...url('SMS') },
    EMAIL: {
      smtp_url: 'smtp://mailer:SECRET-smtp-pass@127.0.0.1:2525',
      from: 'Help <help@example.com>',
      ...(base.EMAIL ? { api_base_url: base.EMAIL } : {}),
    },
    SANDBOX: { delivered_after_ms: 100, read_after_ms: 200 },
  };
}

/** A valid recipient id per platform behind a fake, in the form its `checkRecipient` takes (the sandbox has no platform behind it). */
export const SAMPLE_RECIPIENTS: Record<string, string> = {
  TELEGRAM: '31337',
  WHATSAPP: '+16505550100',
  MESSENGER: '2400100',
  INSTAGRAM: '2400200',
  SLACK: 'C0GENERAL1',
  DISCORD: '112233445566778899',
  SMS: '+14155550100',
  EMAIL: 'ann@example.org',
};

/** Every secret value in `sampleConfigs` (strings containing SECRET). */
export const SAMPLE_SECRETS = Object.values(sampleConfigs()).flatMap((c) =>
  Object.values(c).filter((v): v is string => typeof v === 'string' && v.includes('SECRET')),
);
