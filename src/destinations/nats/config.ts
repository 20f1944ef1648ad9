import { credsAuthenticator, nkeyAuthenticator } from '@nats-io/transport-node';
import { z } from 'zod';
import { fail, ok, type Result } from '../../errors.js';
import { judgeUrl, type OutboundPolicy } from '../../net/outbound-policy.js';
import { isTemplate, TEMPLATE_MESSAGE } from '../template.js';
import type { StoredDestination } from '../types.js';

/** A server list is short: the seed URLs of one cluster, tried in order. */
const MAX_SERVERS = 8;

const credentials = z
  .discriminatedUnion('type', [
    z.strictObject({ type: z.literal('user_password'), user: z.string().min(1).max(255), password: z.string().min(1).max(1024) }),
    z.strictObject({ type: z.literal('token'), token: z.string().min(1).max(4096) }),
    z.strictObject({ type: z.literal('nkey'), seed: z.string().min(1).max(256).describe('the user NKey seed (SU…)') }),
    z.strictObject({
      type: z.literal('creds'),
      creds: z.string().min(1).max(16_384).describe('the contents of a .creds file: the user JWT and its NKey seed'),
    }),
  ])
  .describe('how the gateway authenticates to the server; write-only (responses show only `auth`, its type)');
type Credentials = z.infer<typeof credentials>;

export const natsInput = z.strictObject({
  kind: z.literal('nats'),
  url: z
    .string()
    .min(1)
    .max(2048)
    .describe('nats:// or tls:// URL of the server, or several of one cluster separated by commas; no credentials in it'),
  subject: z
    .string()
    .min(1)
    .max(255)
    .regex(/^[A-Za-z0-9_.:{}-]+$/, 'letters, digits, - _ . : and placeholders only')
    .refine((t) => !/^\.|\.$|\.\./.test(t), { message: 'no empty subject token (leading, trailing or double dot)' })
    .refine(isTemplate, { message: TEMPLATE_MESSAGE })
    .default('{event_type}')
    .describe('JetStream subject template; {event_type} and {app_id} are replaced; a stream must capture it'),
  credentials: credentials.optional(),
});
export type NatsInput = z.infer<typeof natsInput>;

/** What is stored beside the sealed servers and credentials and shown to the owner. */
export const natsConfig = z.object({
  subject: z.string(),
  auth: z.enum(['none', 'user_password', 'token', 'nkey', 'creds']).describe('the type of credentials given (never the credentials)'),
});
export type NatsConfig = z.infer<typeof natsConfig>;

/** The destination as REST shows it: the server URLs, never the credentials. */
export const natsOutput = natsConfig.extend({
  kind: z.literal('nats'),
  url: z.string().describe('the server URLs, comma-separated'),
});

/** What is sealed: the server URLs and the credentials, opened only by the sender. */
export const natsSecret = z.object({ servers: z.array(z.string()).min(1), credentials: credentials.optional() });
type NatsSecret = z.infer<typeof natsSecret>;

const displayUrl = (url: URL) => `${url.protocol}//${url.hostname}:${url.port || '4222'}`;

/** An NKey seed or creds file the client could not sign with: caught when written, not at the first delivery. */
function unusable(c: Credentials): string | undefined {
  try {
    if (c.type === 'nkey') nkeyAuthenticator(new TextEncoder().encode(c.seed))('check');
    if (c.type === 'creds') credsAuthenticator(new TextEncoder().encode(c.creds))('check');
    return undefined;
  } catch {
    return c.type === 'nkey' ? 'not a valid NKey seed' : 'not a valid creds file (a user JWT and an NKey seed)';
  }
}

export function prepareNats(input: NatsInput, policy: OutboundPolicy): Result<StoredDestination> {
  const path = ['destination', 'url'];
  const raw = input.url.split(',').map((u) => u.trim());
  if (raw.length > MAX_SERVERS || raw.some((u) => u === ''))
    return fail('VALIDATION_ERROR', `destination.url must list 1 to ${MAX_SERVERS} URLs separated by commas`, [
      { path, message: 'bad server list' },
    ]);
  const servers: URL[] = [];
  for (const u of raw) {
    const judged = judgeUrl(u, 'nats', policy);
    if (!judged.ok)
      return judged.reason === 'not a URL'
        ? fail('VALIDATION_ERROR', 'destination.url is not a URL', [{ path, message: 'not a URL' }])
        : fail('INVALID_WEBHOOK_TARGET', `destination.url refused: ${judged.reason}`, [{ path, message: judged.reason }]);
    // One place for credentials: the sealed `credentials`, never a URL that is shown.
    if (judged.url.username || judged.url.password || (judged.url.pathname !== '' && judged.url.pathname !== '/'))
      return fail(
        'INVALID_WEBHOOK_TARGET',
        'destination.url refused: must be scheme://host:port only (credentials go in destination.credentials)',
        [{ path, message: 'must be scheme://host:port only' }],
      );
    servers.push(judged.url);
  }
  const bad = input.credentials && unusable(input.credentials);
  if (bad) return fail('VALIDATION_ERROR', `destination.credentials: ${bad}`, [{ path: ['destination', 'credentials'], message: bad }]);
  const config: NatsConfig = { subject: input.subject, auth: input.credentials?.type ?? 'none' };
  const secret: NatsSecret = {
    servers: servers.map((u) => u.toString()),
    ...(input.credentials ? { credentials: input.credentials } : {}),
  };
  return ok({ config, secret: JSON.stringify(secret), display: servers.map(displayUrl).join(',') });
}
