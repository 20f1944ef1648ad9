import type { z } from 'zod';
import type { Result } from '../errors.js';
import type { OutboundPolicy } from '../net/outbound-policy.js';
import type { PostResult } from '../webhooks/http-client.js';

/** One delivery as any destination sends it: the webhook body and its signature headers. */
export interface DestinationMessage {
  deliveryId: string;
  appId: string;
  eventType: string;
  body: string;
  /** The signature and id headers a webhook carries (src/webhooks/signing.ts). */
  headers: Record<string, string>;
}

/**
 * What one send came to, in the HTTP client's shape so retries, logs and dead-lettering stay
 * one implementation (src/webhooks/deliver.ts). `delivered` means the receiver took it (a 2xx,
 * a broker's confirm); `permanent` that retrying cannot help (unroutable, no such exchange,
 * access refused), so the delivery fails now instead of walking the retry schedule.
 */
export interface SendResult extends PostResult {
  delivered: boolean;
  permanent?: boolean;
  /** The headers as the destination carried them, for the delivery log. */
  requestHeaders: Record<string, string>;
}

/** A broker destination as stored: settings shown to its owner, and its secret sealed. */
export interface StoredDestination {
  config: Record<string, unknown>;
  /** What only the sender reads: the URL with its credentials (rabbitmq), the servers and credentials as JSON (nats). */
  secret: string;
  /** The URL without credentials: the subscription's `target_url` for display and logs. */
  display: string;
}

export interface SenderOptions {
  policy: OutboundPolicy;
  /** Deadline for a connect and for one publish's confirm, in ms. */
  timeoutMs: number;
  /** Certificate authorities (PEM) TLS connections trust beside Node's bundle (DESTINATION_CA_FILE). */
  extraCa?: string;
}

/** A live destination as the deliverer hands it to a sender: its id (the pool key), opened secret and settings. */
export interface OpenDestination {
  subscriptionId: string;
  secret: string;
  config: Record<string, unknown>;
}

export interface DestinationSender {
  send(dest: OpenDestination, msg: DestinationMessage): Promise<SendResult>;
  /**
   * Closes the subscription's pooled connections now, all of them or all but `keep`'s (its
   * destination changed, or it was deleted, paused or disabled); publishes in flight on them
   * get their confirms first. A kind without it closes them when idle.
   */
  retire?(subscriptionId: string, keep?: OpenDestination): void;
  close(): Promise<void>;
}

/**
 * One kind of broker destination (src/destinations/<kind>/adapter.ts, listed in registry.ts):
 * how its REST input is checked and stored, and how messages reach it.
 */
export interface DestinationAdapter {
  kind: string;
  /**
   * The REST `destination` object of this kind (its `kind` literal included). Its `url` is what
   * `prepare` seals: a change may leave it out to keep the stored one (src/destinations/inputs.ts).
   */
  input: z.ZodObject<{ kind: z.ZodLiteral<string>; url: z.ZodString } & z.ZodRawShape>;
  /** The destination as REST shows it: stored settings and the URL without credentials. */
  output: z.ZodObject<{ kind: z.ZodLiteral<string>; url: z.ZodString } & z.ZodRawShape>;
  /** Checks an input against the outbound policy and splits it into what is shown and what is sealed. */
  prepare(input: Record<string, unknown>, policy: OutboundPolicy): Result<StoredDestination>;
  /** A sender with a pooled connection per destination, closed when idle. */
  createSender(options: SenderOptions): DestinationSender;
}
