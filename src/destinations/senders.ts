import type { Config } from '../config.js';
import { sentHeaders, type WebhookHttpClient } from '../webhooks/http-client.js';
import { BROKER_KINDS, DESTINATIONS, type BrokerKind } from './registry.js';
import type { DestinationMessage, DestinationSender, OpenDestination, SendResult, SenderOptions } from './types.js';

/** Where a subscription's deliveries go: its HTTP target, or a broker of a registered kind. */
export type Destination = { kind: 'webhook'; targetUrl: string } | ({ kind: BrokerKind } & OpenDestination);

export interface Senders {
  /** Sends one delivery to the subscription's destination; the outcome in the HTTP client's shape. */
  send(destination: Destination, msg: DestinationMessage): Promise<SendResult>;
  /**
   * Closes the broker connections of an application's subscriptions that no longer deliver
   * there: `live` is where its active subscriptions deliver now (a changed URL, a deleted,
   * paused or disabled subscription closes its connection at once, not when idle).
   */
  retire(appId: string, live: Destination[]): void;
  /** The applications this process has published to a broker for. */
  brokerApps(): string[];
  close(): Promise<void>;
}

/**
 * The per-kind senders behind one `send`: the deliverer, replay and test sends never ask which
 * kind a subscription is. Broker senders are made on first use (a process with only webhooks
 * opens no broker client).
 */
export function createSenders(http: WebhookHttpClient, options: SenderOptions): Senders {
  const brokers = new Map<BrokerKind, DestinationSender>();
  /** Each application's subscriptions with a broker connection, to retire when they change. */
  const brokerSubs = new Map<string, Set<string>>();
  const senderOf = (kind: BrokerKind) => {
    let s = brokers.get(kind);
    if (!s) brokers.set(kind, (s = DESTINATIONS[kind].createSender(options)));
    return s;
  };
  return {
    async send(destination, msg) {
      if (destination.kind === 'webhook') {
        const res = await http.post(destination.targetUrl, msg.body, msg.headers);
        const delivered = res.error === undefined && res.statusCode !== undefined && res.statusCode >= 200 && res.statusCode < 300;
        return { ...res, delivered, requestHeaders: sentHeaders(msg.headers) };
      }
      let subs = brokerSubs.get(msg.appId);
      if (!subs) brokerSubs.set(msg.appId, (subs = new Set()));
      subs.add(destination.subscriptionId);
      return senderOf(destination.kind).send(destination, msg);
    },
    retire(appId, live) {
      const subs = brokerSubs.get(appId);
      if (!subs) return;
      const liveOf = new Map(live.flatMap((d) => (d.kind === 'webhook' ? [] : [[d.subscriptionId, d] as const])));
      for (const id of [...subs]) {
        const now = liveOf.get(id);
        for (const [kind, sender] of brokers) sender.retire?.(id, now?.kind === kind ? now : undefined);
        if (!now) subs.delete(id);
      }
      if (subs.size === 0) brokerSubs.delete(appId);
    },
    brokerApps: () => [...brokerSubs.keys()],
    async close() {
      await Promise.allSettled([...brokers.values()].map((s) => s.close()));
      brokers.clear();
    },
  };
}

/** The broker senders' settings from the service's config: every process that sends builds them here. */
export const senderOptions = (config: Config): SenderOptions => ({
  policy: config.OUTBOUND_ADDRESS_POLICY,
  timeoutMs: config.WEBHOOK_TIMEOUT_MS,
  ...(config.DESTINATION_CA_FILE ? { extraCa: config.DESTINATION_CA_FILE } : {}),
});

export const isBrokerKind = (kind: string): kind is BrokerKind => (BROKER_KINDS as string[]).includes(kind);
