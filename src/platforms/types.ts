import type { z } from 'zod';
import type { OutboundProtocol } from '../net/outbound-policy.js';

export const PLATFORM_NAMES = ['TELEGRAM', 'WHATSAPP', 'MESSENGER', 'INSTAGRAM', 'SLACK', 'DISCORD', 'SMS', 'EMAIL', 'SANDBOX'] as const;
export type PlatformName = (typeof PLATFORM_NAMES)[number];

export const isPlatformName = (s: string): s is PlatformName => (PLATFORM_NAMES as readonly string[]).includes(s);

/** Gateway error codes a platform outcome maps to (see ERROR_STATUS in src/errors.ts for HTTP). */
export type PlatformErrorCode =
  | 'REPLY_WINDOW_CLOSED'
  | 'RECIPIENT_NOT_STARTED'
  | 'RECIPIENT_BLOCKED'
  | 'MESSAGE_TOO_LONG'
  | 'INVALID_RECIPIENT'
  | 'PLATFORM_RATE_LIMITED'
  | 'PLATFORM_AUTH_FAILED'
  | 'PLATFORM_UNAVAILABLE'
  | 'PLATFORM_REJECTED'
  | 'DELIVERY_UNCERTAIN';

export interface PlatformError {
  code: PlatformErrorCode;
  message: string;
  /** True for transient failures (network, 5xx, 429) the send worker retries. */
  retryable: boolean;
  /** The platform's requested wait, when it gave one (429 retry_after / Retry-After). */
  retryAfterMs?: number;
  /** The platform's own error code and text, for `details` of a 422. */
  platformCode?: string | number;
  platformMessage?: string;
}

export interface OutboundFile {
  filename: string;
  mimeType: string;
  data: Buffer;
}

export interface OutboundMessage {
  /** Recipient's external id on the platform (chat id, E.164 phone, channel id, e-mail address). */
  to: string;
  text: string;
  /** Telegram only. */
  parseMode?: 'MarkdownV2' | 'HTML';
  /** E-mail only; defaults to the first line of the text. */
  subject?: string;
  files?: OutboundFile[];
  /** E-mail threading / Slack thread: the platform id of the message being replied to. */
  inReplyTo?: string;
  threadId?: string;
}

export type SendOutcome =
  | { ok: true; externalMessageId: string /** Platform's canonical recipient id when it differs (WhatsApp wa_id). */; recipientId?: string }
  | { ok: false; error: PlatformError };

/** What the inbound receiver hands an adapter: the raw bytes plus what signatures need. */
export interface InboundRequest {
  method: 'GET' | 'POST';
  rawBody: Buffer;
  /** Lower-cased header names. */
  headers: Record<string, string>;
  query: Record<string, string>;
  /** The public URL as the platform called it (PUBLIC_BASE_URL + path + query), for Twilio. */
  publicUrl: string;
  /** Current time in ms, passed in so window checks are testable. */
  now: number;
}

export type VerifyOutcome = { ok: true } | { ok: false; reason: string };

/** An answer the receiver sends as is (Meta hub challenge, Slack url_verification, Discord PONG). */
export interface DirectAnswer {
  status: number;
  contentType: string;
  body: string;
}

export interface PlatformParty {
  externalId: string;
  name?: string;
  username?: string;
}

export interface InboundMedia {
  /** The platform's id for the file (Telegram file_id, WhatsApp media id) or a URL. */
  platformFileId?: string;
  url?: string;
  /** Bytes that came inside the delivery itself (e-mail attachments), base64. */
  inlineBase64?: string;
  mimeType?: string;
  filename?: string;
  /** Voice/audio flag for transcription. */
  isAudio?: boolean;
  /** Length the platform reports for voice/audio/video, in seconds. */
  durationSec?: number;
}

/** Normalised records produced by a platform's pure normaliser from one inbound payload. */
export type NormalisedRecord =
  | {
      kind: 'message';
      externalMessageId: string;
      conversation: { externalId: string; name?: string; threadId?: string };
      sender: PlatformParty;
      /** The connected account the message was sent to (bot, page, number). */
      recipient?: PlatformParty;
      message: {
        text: string;
        type: 'text' | 'image' | 'video' | 'audio' | 'voice' | 'document' | 'sticker' | 'location' | 'contact' | 'other';
        media?: InboundMedia;
        caption?: string;
        location?: { latitude: number; longitude: number; name?: string; address?: string };
        contact?: Record<string, unknown>;
        /** Platform-specific fields kept in `payload.message` as they are (e-mail subject and threading ids). */
        extra?: Record<string, unknown>;
      };
      edited?: boolean;
      /** The platform's id of the message this one answers (ours or the user's), when the platform says. */
      replyTo?: string;
      occurredAt: string;
    }
  | {
      kind: 'status';
      externalMessageId: string;
      status: 'sent' | 'delivered' | 'read' | 'failed';
      recipient?: PlatformParty;
      error?: { code?: string | number; message?: string };
      occurredAt: string;
    }
  | {
      /**
       * "Everything we sent this user up to `upTo` reached `status`" (Messenger/Instagram
       * delivery and read watermarks): resolved against our outbound messages by the worker.
       */
      kind: 'watermark';
      status: 'delivered' | 'read';
      recipient: PlatformParty;
      upTo: string;
      occurredAt: string;
    }
  | {
      kind: 'reaction';
      targetExternalMessageId: string;
      /**
       * The reacted message's id inside its conversation when the platform's ids are only
       * unique per chat (Telegram message_id, Slack ts): how a sent message may be stored.
       */
      targetLocalId?: string;
      emoji: string;
      action: 'added' | 'removed';
      sender: PlatformParty;
      conversation: { externalId: string };
      occurredAt: string;
    };

/** What a normaliser sees: the delivery as queued. */
export interface NormaliseInput extends Pick<InboundRequest, 'rawBody' | 'headers'> {
  /** When the receiver accepted it (ISO 8601): the time of deliveries that carry none (Twilio). */
  receivedAt?: string;
}

export interface SendContext {
  /** Overrides the platform's API base URL (config.api_base_url wins over this). */
  defaultBaseUrl?: string;
  /** Bound on one platform call (ms). */
  timeoutMs: number;
  /** The connection's inbound URL, for platforms told per message where to report status (Twilio StatusCallback). */
  webhookUrl?: string;
  /**
   * Calls go through the outbound address policy (public addresses only): set unless every URL
   * this send can reach was chosen by the operator (PLATFORM_API_BASES, no tenant api_base_url).
   */
  guarded?: boolean;
}

/** One budget: at most `rate` sends per `perMs`, with `burst` extra sends allowed in a row. */
export interface Budget {
  rate: number;
  perMs: number;
  burst: number;
}

/** Per-connection and per-recipient send budgets, from the platform's documented limits. */
export interface RateBudget {
  connection: Budget;
  recipient: Budget;
}

/**
 * Whether the connected account may message a conversation (each platform's documented rules):
 * - `window_24h`: free-form replies only within 24 hours of the person's last message;
 * - `user_must_start`: the person must have written first (a bot they started);
 * - `none`: no rule known to restrict replies.
 */
export const REPLY_POLICIES = ['window_24h', 'user_must_start', 'none'] as const;
export type ReplyPolicy = (typeof REPLY_POLICIES)[number];

export interface DownloadedMedia {
  data: Buffer;
  mimeType?: string;
  filename?: string;
}

/**
 * The GETs a platform's media download may make (src/platforms/media.ts): each one under the
 * outbound address policy, redirects judged hop by hop, all within one deadline.
 */
export interface MediaFetch {
  /** A JSON answer and its status (a file lookup). */
  json(url: string, headers?: Record<string, string>): Promise<{ status: number; body: unknown }>;
  /** The bytes behind a URL, following redirects without `headers`; fails on an error status or past 50 MB. */
  bytes(url: string, headers?: Record<string, string>): Promise<{ data: Buffer; contentType?: string }>;
}

/** A delivery a platform will make on its own later, in its own inbound shape (the sandbox's simulated status reports). */
export interface ScheduledDelivery {
  /** How long after the send it arrives. */
  delayMs: number;
  rawBody: Buffer;
}

/** Link-code deep links (src/identity/link-codes.ts). */
export interface DeepLinks {
  /**
   * The link that opens a chat with the connected account with `code` typed in, from the
   * connection's public config; undefined when the platform has none or the config lacks the
   * public handle it needs.
   */
  url(publicConfig: Record<string, unknown>, code: string): string | undefined;
  /** The code inside what a followed link sends (Telegram's `/start <code>`); undefined when `text` is not that. */
  codeIn?(text: string): string | undefined;
}

/** For platforms with no link that opens a chat with text typed in: the person types the code. */
export const NO_DEEP_LINK: DeepLinks = { url: () => undefined };

/**
 * One platform behind one interface (docs/architecture.md, Platforms). `C` is the decrypted connection config.
 * Sending lives in `send.ts`, inbound verification and normalisation in `inbound.ts` of each
 * platform folder; `adapter.ts` there assembles the adapter with the platform's remaining
 * knowledge, and `registry.ts` lists the adapters. Every member without `?` is a capability
 * each platform must state, so a platform missing one does not compile.
 */
export interface PlatformAdapter<C = Record<string, unknown>> {
  name: PlatformName;
  /** zod schema of `config`, including the optional `api_base_url`. */
  configSchema: z.ZodType<C>;
  /** Config fields that are secrets: encrypted at rest, masked on reads. */
  secretFields: readonly string[];
  /**
   * Every config field naming a server our workers connect to, with the protocol spoken to it:
   * the outbound address policy judges each (src/net/outbound-policy.ts) when the config is
   * written and before each connection. Fields are judged in this order. A URL field missing
   * here fails test/security/ssrf-fields.test.ts.
   */
  addressFields: Readonly<Record<string, OutboundProtocol>>;
  /** Text limit checked before sending (MESSAGE_TOO_LONG). */
  maxTextLength?: number;
  /** Whether `send` takes `files`; a send with files on another platform is refused before queueing. */
  acceptsFiles: boolean;
  /** Returns an INVALID_RECIPIENT message when `to` is not a valid id for the platform. */
  checkRecipient(to: string): string | undefined;
  send(config: C, message: OutboundMessage, ctx: SendContext): Promise<SendOutcome>;
  /** Send budgets, spent by src/platforms/rate-budget.ts. */
  rateBudget: RateBudget;
  /** The reply rule for one conversation, by its external id (src/conversations/reply-window.ts). */
  replyPolicy(conversationExternalId: string): ReplyPolicy;
  /**
   * The external id of the connected account itself (the bot, page or number): the system user
   * that `sent_to` of inbound messages and `sent_by` of outbound ones point at.
   */
  systemExternalId(config: C): string;
  /**
   * The config fields naming the platform account a connection speaks for: each value belongs
   * to at most one connection across every application (src/connections/routing-ids.ts).
   * Empty when the platform needs none.
   */
  routingFields: readonly string[];
  /** One spelling for a routing id that can be written several ways (e-mail mailboxes); as is without it. */
  canonicalRoutingId?(id: string): string;
  /** Platform signature/token check over the raw request. */
  verify(config: C, req: InboundRequest): VerifyOutcome;
  /** Challenge answers that need no enqueue; undefined when the request is an ordinary delivery. */
  handshake?(config: C, req: InboundRequest): DirectAnswer | undefined;
  /**
   * The platform's dedupe key for one delivery (the platform's API reference), so retries collapse into one
   * job; undefined when the body is not a delivery of this platform at all (answered 400).
   */
  dedupeKey(req: InboundRequest): string | undefined;
  /** Pure: raw payload → normalised records. Throws on a body that is not the platform's shape. */
  normalise(req: NormaliseInput): NormalisedRecord[];
  /** The answer to an accepted delivery when the platform expects more than 200 (Twilio TwiML, Discord deferral). */
  acknowledge?(req: InboundRequest): DirectAnswer;
  /**
   * The account ids a payload is addressed to (entry[].id, metadata.phone_number_id). Present
   * exactly on the platforms reached through one shared URL for the whole service (the Meta
   * family, docs/inbound.md), which is routed by these ids.
   */
  routingIds?(body: unknown): string[];
  /**
   * Downloads an inbound message's media the platform's way (the platform's API reference); bytes that came
   * inside the delivery are taken before this is called.
   */
  downloadMedia(config: C, media: InboundMedia, fetch: MediaFetch): Promise<DownloadedMedia>;
  deepLink: DeepLinks;
  /**
   * The deliveries the platform will make about a message it accepted, each after a delay:
   * the sandbox's simulated `delivered` and `read` reports. Queued as delayed inbound jobs once
   * the send is recorded (src/inbound/scheduled-deliveries.ts), so they reach the ledger through
   * the inbound worker like any platform's status webhook. Absent on real platforms, which
   * report by calling the inbound URL themselves.
   */
  reportsAfterSend?(config: C, sent: { externalMessageId: string; to: string; sentAt: number }): ScheduledDelivery[];
}

/** The sending half of an adapter: each platform folder's config.ts and send.ts. */
export type SendHalf = Pick<
  PlatformAdapter,
  'configSchema' | 'secretFields' | 'maxTextLength' | 'acceptsFiles' | 'checkRecipient' | 'send'
>;

/** Builds a SendHalf from a platform's typed config schema and sender. */
export function sendHalf<C>(
  half: Pick<PlatformAdapter<C>, 'configSchema' | 'secretFields' | 'maxTextLength' | 'acceptsFiles' | 'checkRecipient' | 'send'>,
): SendHalf {
  // The registry hands `send` the config its own schema produced, so widening C is safe.
  return half as unknown as SendHalf;
}

/** What each platform folder's `inbound.ts` provides; its `adapter.ts` merges it with the sending half. */
export type InboundHalf<C = Record<string, unknown>> = Pick<
  PlatformAdapter<C>,
  'verify' | 'handshake' | 'dedupeKey' | 'normalise' | 'acknowledge' | 'routingIds'
>;
