import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { MalformedPayloadError } from '../../src/errors.js';
import { ADAPTERS } from '../../src/platforms/registry.js';
import { PLATFORM_NAMES, type InboundRequest, type PlatformName } from '../../src/platforms/types.js';
import * as P from '../fakes/inbound/payloads.js';
import { inboundReq } from '../fakes/inbound/request.js';
import { nastyJson, nastyString, RUNS } from './support/fuzz.js';

/**
 * Property-based sweep of every platform's inbound half. The web process runs `verify`,
 * `handshake` and `dedupeKey` on whatever arrives (a throw there is a 500 to the platform);
 * the worker runs `normalise`, which may refuse a delivery only with MalformedPayloadError.
 * Inputs: random bytes, random JSON, and documented payloads with one part replaced by
 * something hostile — the shapes a buggy or malicious sender actually produces.
 */

/** A documented delivery per platform, as the raw body the platform sends. */
const SAMPLES: Record<PlatformName, { body: unknown; form?: boolean }[]> = {
  TELEGRAM: [
    { body: P.tgText(1, 2, 'hi') },
    { body: P.tgPhoto(3, 4, 'cap') },
    { body: P.tgReaction(5, 6, ['👍'], ['❤']) },
    { body: P.tgEdited(7, 8, 'x') },
  ],
  WHATSAPP: [
    { body: P.waText('waba', '100', '15550001', 'wamid.1', 'hi') },
    { body: P.waImage('waba', '100', '15550001', 'wamid.2', 'media1', 'cap') },
    { body: P.waStatus('waba', '100', 'wamid.3', 'delivered') },
    { body: P.waReaction('waba', '100', '15550001', 'wamid.4', 'wamid.1', '👍') },
  ],
  MESSENGER: [
    { body: P.fbText('page', '200', 'psid1', 'mid.1', 'hi') },
    { body: P.fbDelivery('page', '200', 'psid1', 1700000000000, ['mid.1']) },
    { body: P.fbReaction('page', '200', 'psid1', 'mid.1', 'react') },
  ],
  INSTAGRAM: [
    { body: P.fbText('instagram', '300', 'igsid', 'mid.2', 'hi') },
    { body: P.fbRead('instagram', '300', 'igsid', 1700000000000) },
    { body: P.fbEdit('instagram', '300', 'igsid', 'mid.2', 'edited') },
  ],
  SLACK: [
    { body: P.slackMessage('Ev1', 'C1', 'U1', '1700000000.000100', 'hi') },
    { body: P.slackReaction('Ev2', 'C1', 'U1', '1700000000.000100', 'thumbsup') },
  ],
  DISCORD: [
    { body: P.discordCommand('1', 'c1', 'u1', 'ask', [{ name: 'q', type: 3, value: 'hi' }]) },
    { body: P.discordComponent('2', 'c1', 'u1', 'btn') },
  ],
  SMS: [
    { body: P.twilioInbound('SM1', '+15550001', '+15550002', 'hi', [{ url: 'https://api.twilio.com/m', type: 'image/jpeg' }]), form: true },
    { body: P.twilioStatus('SM2', '+15550002', 'delivered'), form: true },
  ],
  EMAIL: [{ body: P.email('<m1@example.com>', 'eve@example.com', 'hi') }],
  SANDBOX: [
    { body: { type: 'message', id: 'm1', from: { id: 'ada' }, text: 'hi', timestamp: '2026-01-01T00:00:00Z' } },
    {
      body: {
        type: 'message',
        id: 'm2',
        from: { id: 'ada', name: 'Ada' },
        text: 'cap',
        media: { content_base64: 'aGk=', mime_type: 'image/png' },
        reply_to: 'm1',
        timestamp: '2026-01-01T00:00:00Z',
      },
    },
    {
      body: {
        type: 'reaction',
        id: 'r1',
        from: { id: 'ada' },
        message_id: 'm1',
        emoji: '👍',
        action: 'added',
        timestamp: '2026-01-01T00:00:00Z',
      },
    },
    { body: { type: 'status', id: 's1', message_id: 'sbx-1', to: 'ada', status: 'read', timestamp: '2026-01-01T00:00:00Z' } },
  ],
};

const encode = (body: unknown, form?: boolean) =>
  form && body && typeof body === 'object' && !Array.isArray(body)
    ? new URLSearchParams(
        Object.entries(body as Record<string, unknown>).map(([k, v]) => [k, typeof v === 'string' ? v : JSON.stringify(v)]),
      ).toString()
    : JSON.stringify(body);

/** Every path to a value inside a JSON document. */
function paths(v: unknown, at: (string | number)[] = []): (string | number)[][] {
  const here = at.length ? [at] : [];
  if (Array.isArray(v)) return [...here, ...v.flatMap((x, i) => paths(x, [...at, i]))];
  if (v && typeof v === 'object') return [...here, ...Object.entries(v).flatMap(([k, x]) => paths(x, [...at, k]))];
  return here;
}
function replaceAt(v: unknown, path: (string | number)[], value: unknown): unknown {
  if (path.length === 0) return value;
  const [head, ...rest] = path;
  if (Array.isArray(v)) return v.map((x, i) => (i === head ? replaceAt(x, rest, value) : x));
  if (v && typeof v === 'object') return { ...v, [head]: replaceAt((v as Record<string, unknown>)[head as string], rest, value) };
  return v;
}

/** A documented payload with one value (or whole subtree) replaced, or removed. */
const mutated = (platform: PlatformName) =>
  fc.constantFrom(...SAMPLES[platform]).chain((sample) => {
    const all = paths(sample.body);
    return fc
      .tuple(fc.constantFrom(...all), fc.oneof(nastyJson, fc.constant(undefined)))
      .map(([path, value]) => encode(replaceAt(sample.body, path, value), sample.form));
  });

const rawBodies = (platform: PlatformName) =>
  fc.oneof(
    { arbitrary: mutated(platform), weight: 6 },
    { arbitrary: nastyJson.map((v) => JSON.stringify(v) ?? ''), weight: 2 },
    { arbitrary: fc.uint8Array({ maxLength: 64 }).map((b) => Buffer.from(b).toString('latin1')), weight: 1 },
    { arbitrary: nastyString, weight: 1 },
  );

const headers = fc.dictionary(
  fc.constantFrom(
    'content-type',
    'x-hub-signature-256',
    'x-slack-signature',
    'x-slack-request-timestamp',
    'x-signature-ed25519',
    'x-signature-timestamp',
    'x-twilio-signature',
    'x-telegram-bot-api-secret-token',
    'x-gateway-signature',
    'x-gateway-timestamp',
  ),
  nastyString,
  { maxKeys: 4 },
);

const config = {
  secret_token: 'tg-secret',
  app_secret: 'meta-secret',
  verify_token: 'verify',
  signing_secret: 'slack-secret',
  public_key: 'ab'.repeat(32),
  auth_token: 'twilio-token',
  inbound_secret: 'email-secret',
};

function req(raw: string, h: Record<string, string>, method: 'GET' | 'POST' = 'POST', query: Record<string, string> = {}): InboundRequest {
  return inboundReq(Buffer.from(raw, 'latin1'), h, { method, query });
}

describe.each(PLATFORM_NAMES)('%s inbound half', (platform) => {
  const half = ADAPTERS[platform];

  it('normalises any delivery to records, or refuses it only with MalformedPayloadError', () => {
    fc.assert(
      fc.property(rawBodies(platform), headers, (raw, h) => {
        let records: unknown;
        try {
          records = half.normalise({ rawBody: Buffer.from(raw, 'latin1'), headers: h, receivedAt: new Date().toISOString() });
        } catch (err) {
          if (err instanceof MalformedPayloadError) return;
          throw new Error(`normalise threw ${(err as Error)?.name}: ${(err as Error)?.message} on ${raw.slice(0, 300)}`);
        }
        expect(Array.isArray(records)).toBe(true);
        for (const r of records as { kind: string }[]) expect(['message', 'status', 'reaction', 'watermark']).toContain(r.kind);
      }),
      { numRuns: RUNS * 10 },
    );
  });

  it('never throws from verify, handshake, dedupeKey or acknowledge (they run in the web process)', () => {
    const query = fc.dictionary(fc.constantFrom('hub.mode', 'hub.verify_token', 'hub.challenge', 'x'), nastyString, { maxKeys: 3 });
    fc.assert(
      fc.property(rawBodies(platform), headers, fc.constantFrom<'GET' | 'POST'>('GET', 'POST'), query, (raw, h, method, q) => {
        const r = req(raw, h, method, q);
        const outcome = half.verify(config, r);
        expect(typeof outcome.ok).toBe('boolean');
        half.handshake?.(config, r);
        const key = half.dedupeKey(r);
        if (key !== undefined) expect(typeof key).toBe('string');
        half.acknowledge?.(r);
      }),
      { numRuns: RUNS * 10 },
    );
  });

  it('still normalises its documented deliveries (the sweep starts from real shapes)', () => {
    for (const sample of SAMPLES[platform]) {
      const records = half.normalise({
        rawBody: Buffer.from(encode(sample.body, sample.form)),
        headers: sample.form ? { 'content-type': 'application/x-www-form-urlencoded' } : { 'content-type': 'application/json' },
      });
      expect(records.length, `${platform} ${encode(sample.body, sample.form).slice(0, 120)}`).toBeGreaterThan(0);
    }
  });
});

describe('regressions the sweep found', () => {
  it('SMS: a NumMedia of 1e300 is bounded (it used to loop forever in the worker)', () => {
    const body = new URLSearchParams({
      ...P.twilioInbound('SM9', '+15550001', '+15550002', 'hi'),
      NumMedia: '1e300',
      MediaUrl0: 'https://api.twilio.com/m0',
    }).toString();
    const [r] = ADAPTERS.SMS.normalise({ rawBody: Buffer.from(body), headers: {} }) as {
      kind: string;
      message: { media?: { url: string } };
    }[];
    expect(r.message.media?.url).toBe('https://api.twilio.com/m0');
  });

  it('Telegram and Slack: a timestamp beyond what a Date holds falls back instead of throwing', () => {
    const tg = { ...P.tgEdited(7, 8, 'x') };
    tg.edited_message.edit_date = -8.64e12 - 1;
    expect(ADAPTERS.TELEGRAM.normalise({ rawBody: Buffer.from(JSON.stringify(tg)), headers: {} })).toHaveLength(1);
    const slack = P.slackMessage('Ev9', 'C1', 'U1', '9'.repeat(30), 'hi');
    expect(() => ADAPTERS.SLACK.normalise({ rawBody: Buffer.from(JSON.stringify(slack)), headers: {} })).not.toThrow();
  });
});
