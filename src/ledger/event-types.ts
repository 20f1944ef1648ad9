import { z } from 'zod';
import { PLATFORM_NAMES } from '../platforms/types.js';

/**
 * The catalog of system event types: the events the service itself records (custom types
 * posted by clients are not here). Each type names its payload schema, the builder every
 * writer goes through, and where it is emitted; docs/events.md is generated from it
 * (`npm run docs:events`). test/ledger/event-types.test.ts fails when a system type is
 * spelled out as a value anywhere else but as an argument of this file's functions and types
 * (`systemEvent`, `systemEventType`, where the compiler checks it), and every test stack
 * checks on close that the system events its flows stored parse against their schemas.
 */

/** Prefixes of the system types a client cannot post as custom events. */
export const RESERVED_PREFIXES = ['message.', 'user.', 'system.', 'link_code.'] as const;

const uuid = z.uuid();
const PLATFORMS = PLATFORM_NAMES.map((p) => p.toLowerCase()) as [string, ...string[]];
const platform = z.enum(PLATFORMS).describe('Platform of the connection, lower case');
const timestamp = z.string().describe('When the platform says it happened (ISO 8601)');

/** Where a type is recorded: a file that builds it, and on which occasion. */
interface Emitter {
  file: string;
  when: string;
}

interface EventDef<S extends z.ZodType<Record<string, unknown>>, I extends unknown[]> {
  summary: string;
  emittedBy: Emitter[];
  /** False for a type that is only ever delivered, never stored in the ledger. */
  stored?: false;
  payload: S;
  build: (...input: I) => z.output<S>;
  aliases?: Aliases<z.output<S>>;
}

/**
 * The other names the API gives a stored event: `message.read` is a `message.status` whose
 * status is `read`, `message.telegram.inbound` a Telegram `message.inbound`. The ledger keeps one
 * row per fact under its stored type; the alias is computed from the payload when the row is
 * written (src/ledger/write.ts) and every matcher — webhook patterns, stream filters, the
 * `event_type` filter of listings — treats it as a second name of the row.
 */
interface Aliases<P> {
  /** Every name the rule can give, with the events it names in words (a name outside this list is never stored). */
  names: Readonly<Record<string, string>>;
  /** The alias of one payload, if it has one. At most one per event: the ledger stores one. */
  of: (payload: P) => string | undefined;
  /** The rule in words, for docs/events.md. */
  rule: string;
}

/**
 * One catalog entry. Its builder's output is tied to its schema's type, so a builder that
 * drifts from its schema does not compile; without a builder the payload is taken as given,
 * typed by the schema (an object literal with a field the schema lacks does not compile).
 */
function defineEvent<S extends z.ZodType<Record<string, unknown>>, I extends unknown[]>(def: EventDef<S, I>): EventDef<S, I>;
function defineEvent<S extends z.ZodType<Record<string, unknown>>>(
  def: Omit<EventDef<S, [z.output<S>]>, 'build'>,
): EventDef<S, [z.output<S>]>;
function defineEvent(
  def: Omit<EventDef<z.ZodType<Record<string, unknown>>, unknown[]>, 'build'> & {
    build?: (...input: unknown[]) => Record<string, unknown>;
  },
) {
  return { build: (payload: Record<string, unknown>) => payload, ...def };
}

const transcription = z
  .strictObject({
    status: z.enum(['completed', 'failed', 'skipped']).describe('`skipped` when no transcription provider is configured'),
    language: z.string().optional().describe("The provider's name for the spoken language"),
    duration_ms: z.number().int().optional().describe('How long the transcription took'),
    audio_duration_ms: z.number().int().optional().describe('Length of the audio, when the provider reports it'),
    attempts: z.number().int().optional().describe('Attempts made, when every one failed'),
    error: z.string().optional().describe('Why it failed'),
  })
  .describe('Voice and audio only: how the transcription went');

const inboundMessage = z
  .looseObject({
    text: z.string().describe("The message's text ('' when it has none)"),
    role: z.literal('user'),
    type: z.enum(['text', 'image', 'video', 'audio', 'voice', 'document', 'sticker', 'location', 'contact', 'other']),
    caption: z.string().optional().describe('Caption of a media message'),
    location: z
      .strictObject({ latitude: z.number(), longitude: z.number(), name: z.string().optional(), address: z.string().optional() })
      .optional()
      .describe('A shared location'),
    contact: z.record(z.string(), z.unknown()).optional().describe('A shared contact, as the platform sent it'),
    media: z
      .union([
        z.strictObject({ id: uuid, mime_type: z.string().nullable(), url: z.string() }),
        z.strictObject({ id: z.null(), mime_type: z.string().nullable(), url: z.null(), error: z.string() }),
      ])
      .optional()
      .describe(
        'The attached file as stored (`url` is its content under /v1/files); `id` and `url` are null and `error` says why when it could not be downloaded',
      ),
    transcription: transcription.optional(),
    transcript: z.string().optional().describe('The transcribed text, when transcription completed'),
    reply_to: z
      .strictObject({
        external_message_id: z.string().describe("The platform's id of the message answered"),
        event_id: uuid
          .nullable()
          .describe('Its event (a `message.inbound` or our `message.outbound`), when it was recorded; also the origin'),
      })
      .optional()
      .describe('Set when the message answers an earlier one (sandbox replies)'),
  })
  .describe(
    "The message; platform-specific fields are kept beside these as the platform's normaliser gave them (e-mail subject and threading ids, Discord interaction fields, further SMS media)",
  );
export type InboundMessage = z.output<typeof inboundMessage>;
export type Transcription = z.output<typeof transcription>;

const inboundPayload = z.strictObject({
  message: inboundMessage,
  platform,
  external_message_id: z.string().describe("The platform's id of the message (Telegram `<chat id>:<message id>`, Slack `<channel>:<ts>`)"),
  conversation_id: uuid.describe('The conversation it belongs to'),
  timestamp,
  edited: z.literal(true).optional().describe('Set on an edit: same `external_message_id`, and the event follows from the original one'),
});

const platformStatus = z
  .strictObject({
    status: z.enum(['sent', 'delivered', 'read', 'failed']),
    external_message_id: z.string().describe("The platform's id of our message"),
    origin_event_id: uuid.nullable().describe('Our `message.outbound` event, when the message is known'),
    platform,
    timestamp,
    error: z
      .strictObject({ code: z.union([z.string(), z.number()]).optional(), message: z.string().optional() })
      .optional()
      .describe("The platform's error, when it reported one"),
  })
  .describe('A status the platform reported');

const sendFailed = z
  .strictObject({
    status: z.literal('failed'),
    message_id: uuid.describe('The message POST /v1/messages accepted'),
    origin_event_id: z.null(),
    external_message_id: z.null(),
    platform,
    error: z
      .strictObject({
        code: z.string().describe('Gateway error code'),
        message: z.string(),
        platform_code: z.union([z.string(), z.number()]).optional(),
        platform_message: z.string().optional(),
      })
      .describe('The final error, as stored on the message'),
    conversation_id: uuid.describe("The recipient's conversation"),
  })
  .describe('A send that failed for good (no attempt left, or an error no retry can fix)');

type PlatformStatus = z.output<typeof platformStatus>;
/** The statuses the API names as event types of their own. */
const STATUS_ALIASES = ['delivered', 'read', 'failed'] as const;

export const SYSTEM_EVENTS = {
  'message.inbound': defineEvent({
    summary: 'A message from a user on a connected platform.',
    emittedBy: [
      {
        file: 'src/inbound/records.ts',
        when: 'the inbound worker records a platform message (voice and audio go through transcription first)',
      },
      { file: 'workers/transcription.ts', when: 'a voice or audio message once transcribed, or once transcription finally failed' },
    ],
    payload: inboundPayload,
    aliases: {
      names: Object.fromEntries(PLATFORMS.map((p) => [`message.${p}.inbound`, `\`platform\` is \`${p}\``])),
      of: (p) => `message.${p.platform}.inbound`,
      rule: "after the payload's `platform`",
    },
    build: ({ edited, ...p }: Omit<z.output<typeof inboundPayload>, 'edited'> & { edited?: boolean }) => ({
      ...p,
      ...(edited ? { edited: true as const } : {}),
    }),
  }),
  'message.outbound': defineEvent({
    summary: 'A message the service sent (POST /v1/messages), under the message id.',
    emittedBy: [{ file: 'src/messages/delivery.ts', when: "the send worker got the platform's message id" }],
    payload: z.strictObject({
      message: z.strictObject({ text: z.string().describe('The text sent'), role: z.literal('assistant') }),
      platform,
      external_message_id: z.string().describe("The platform's id of the sent message"),
      conversation_id: uuid.describe("The recipient's conversation"),
      status: z.literal('sent'),
    }),
    build: ({ text, ...p }: { text: string; platform: string; external_message_id: string; conversation_id: string }) => ({
      message: { text, role: 'assistant' as const },
      ...p,
      status: 'sent' as const,
    }),
  }),
  'message.status': defineEvent({
    summary: 'A delivery status of a message the service sent; a status never moves a message backwards.',
    emittedBy: [
      { file: 'src/inbound/records.ts', when: 'a platform reports a status (or a Messenger/Instagram watermark covers the message)' },
      { file: 'src/messages/delivery.ts', when: 'a send failed for good' },
    ],
    payload: z.union([platformStatus, sendFailed]),
    aliases: {
      names: Object.fromEntries(STATUS_ALIASES.map((status) => [`message.${status}`, `\`status\` is \`${status}\``])),
      of: (p) => (STATUS_ALIASES.some((s) => s === p.status) ? `message.${p.status}` : undefined),
      rule: "after the payload's `status`; `sent` has no name of its own",
    },
    build: (
      p:
        | ({ kind: 'platform' } & PlatformStatus)
        | {
            kind: 'send_failed';
            message_id: string;
            platform: string;
            error: z.output<typeof sendFailed>['error'];
            conversation_id: string;
          },
    ) => {
      if (p.kind === 'send_failed') {
        const { message_id, platform, error, conversation_id } = p;
        return {
          status: 'failed' as const,
          message_id,
          origin_event_id: null,
          external_message_id: null,
          platform,
          error,
          conversation_id,
        };
      }
      const { kind: _kind, error, ...status } = p;
      return { ...status, ...(error ? { error } : {}) };
    },
  }),
  'message.reaction': defineEvent({
    summary: "A reaction added to or removed from a message; it follows from the reacted message's event when that is known.",
    emittedBy: [{ file: 'src/inbound/records.ts', when: 'a platform reports a reaction' }],
    payload: z.strictObject({
      reaction: z.strictObject({
        emoji: z.string().describe('The emoji (Slack: its name, such as `tada`)'),
        message_id: z.string().describe("The platform's id of the reacted message"),
      }),
      action: z.enum(['added', 'removed']),
      platform,
      conversation_id: uuid.describe('The conversation of the reacted message'),
      origin_event_id: uuid.nullable().describe("The reacted message's event, when known"),
      timestamp,
    }),
  }),
  'user.merged': defineEvent({
    summary: "One user merged into another: the source user's platform users now belong to the target.",
    emittedBy: [
      {
        file: 'src/identity/merge.ts',
        when: 'POST /v1/users/:id/merge (GraphQL `mergeUsers`), or a link code activation that merged two users',
      },
    ],
    payload: z.strictObject({
      target_user_id: uuid.describe('The surviving user'),
      source_user_id: uuid.describe('The user merged away'),
      platform_user_ids: z.array(uuid).describe('Every platform user that moved (edges name at most 100 of them)'),
      link_code_id: uuid.optional().describe('The link code whose activation merged them'),
    }),
    build: ({
      link_code_id,
      ...p
    }: {
      target_user_id: string;
      source_user_id: string;
      platform_user_ids: string[];
      link_code_id: string | null;
    }) => ({
      ...p,
      ...(link_code_id ? { link_code_id } : {}),
    }),
  }),
  'link_code.generated': defineEvent({
    summary: 'A link code was created for a user (the payload never holds the code itself).',
    emittedBy: [{ file: 'src/identity/link-codes.ts', when: 'POST /v1/link-codes (GraphQL `createLinkCode`)' }],
    payload: z.strictObject({
      link_code_id: uuid.describe("The code's id; the code itself is only ever in the answer to its creator"),
      user_id: uuid.describe('The user the code links to'),
      expires_at: z.string().describe('ISO 8601'),
    }),
  }),
  'link_code.activation': defineEvent({
    summary: 'A platform user used a link code; recorded after `user.merged` when users merged.',
    emittedBy: [
      {
        file: 'src/identity/link-codes.ts',
        when: 'POST /v1/link-codes/:code/activate (GraphQL `activateLinkCode`), or an inbound message carrying a code',
      },
    ],
    payload: z.strictObject({
      link_code_id: uuid.describe('The link code used'),
      user_id: uuid.describe("The code's user (its survivor, if merged since): the platform user's user now"),
      platform_user_id: uuid.describe('The platform user who used it'),
      merged_user_id: uuid.nullable().describe('The user merged into `user_id` by this activation; null when none was'),
      via: z.enum(['api', 'inbound']).describe('`inbound` when the code came in a platform message'),
    }),
  }),
  'system.webhook_disabled': defineEvent({
    summary: 'A webhook subscription was disabled after WEBHOOK_DISABLE_AFTER failed deliveries in a row.',
    emittedBy: [{ file: 'src/webhooks/attempt-log.ts', when: 'a failed delivery pushes its subscription over the limit' }],
    payload: z.strictObject({
      subscription_id: uuid,
      name: z.string().describe("The subscription's name"),
      target_url: z.string(),
      consecutive_failures: z.number().int().describe('Failed deliveries in a row'),
      disabled_at: z.string().describe('ISO 8601'),
    }),
  }),
  'webhook.test': defineEvent({
    summary: 'A test delivery to one subscription.',
    emittedBy: [{ file: 'src/webhooks/test-send.ts', when: 'POST /v1/webhook-subscriptions/:id/test (GraphQL `testWebhookSubscription`)' }],
    stored: false,
    payload: z.strictObject({ message: z.literal('Test delivery from the messaging gateway') }),
    build: () => ({ message: 'Test delivery from the messaging gateway' as const }),
  }),
};

export type SystemEventType = keyof typeof SYSTEM_EVENTS;
type Catalog = typeof SYSTEM_EVENTS;
export type SystemEventPayload<T extends SystemEventType> = ReturnType<Catalog[T]['build']>;

/** The `event_type` and `payload` of a system event: the one way a writer builds them. */
export function systemEvent<T extends SystemEventType>(
  type: T,
  ...input: Parameters<Catalog[T]['build']>
): { event_type: T; payload: SystemEventPayload<T> } {
  // One entry's builder, but TypeScript cannot follow `T` from the key to its own builder.
  const build = SYSTEM_EVENTS[type].build as unknown as (...input: Parameters<Catalog[T]['build']>) => SystemEventPayload<T>;
  return { event_type: type, payload: build(...input) };
}

/** A system type's name where only the name is wanted (a SQL filter, a comparison): checked against the catalog. */
export const systemEventType = <T extends SystemEventType>(type: T): T => type;

export const isSystemEventType = (type: string): type is SystemEventType => Object.hasOwn(SYSTEM_EVENTS, type);

type AnyAliases = Aliases<Record<string, unknown>>;
const aliasesOf = (type: SystemEventType): AnyAliases | undefined => (SYSTEM_EVENTS[type] as { aliases?: AnyAliases }).aliases;

/** Each alias name and the stored type it stands for. */
export const EVENT_ALIASES: ReadonlyMap<string, SystemEventType> = new Map(
  (Object.keys(SYSTEM_EVENTS) as SystemEventType[]).flatMap((type) =>
    Object.keys(aliasesOf(type)?.names ?? {}).map((name) => [name, type] as const),
  ),
);

/** The rule of a type's aliases, for the docs: its names and the rule in words. */
export const aliasRuleOf = (type: SystemEventType): Pick<AnyAliases, 'names' | 'rule'> | undefined => aliasesOf(type);

/**
 * The alias of an event about to be stored, or null. Custom types never have one (they
 * cannot use the reserved prefixes every alias is under).
 */
export function eventAlias(event: { event_type: string; payload: Record<string, unknown> }): string | null {
  if (!isSystemEventType(event.event_type)) return null;
  const name = aliasesOf(event.event_type)?.of(event.payload);
  // A payload off its schema could spell anything; only a documented name is stored.
  return name !== undefined && EVENT_ALIASES.get(name) === event.event_type ? name : null;
}

/**
 * True when a filter on `event_type LIKE prefix%` alone would miss events answering to an
 * alias under the prefix (`message.r` → `message.read`, stored as `message.status`). A prefix
 * such as `message.` covers every alias's stored type already.
 */
export const prefixNeedsAliases = (prefix: string): boolean =>
  [...EVENT_ALIASES].some(([name, type]) => name.startsWith(prefix) && !type.startsWith(prefix));
