import type { SecretBox } from '../crypto/secrets.js';
import type { Deps } from '../deps.js';
import type { DestinationChange, DestinationOutput } from '../destinations/inputs.js';
import { DESTINATIONS } from '../destinations/registry.js';
import { isBrokerKind, type Destination } from '../destinations/senders.js';
import { fail, ok, type Result } from '../errors.js';
import { checkTargetUrl } from '../net/outbound-policy.js';

/** A subscription's destination as stored (migration 1700000000105). */
export interface StoredDestinationColumns {
  id: string;
  target_url: string;
  destination: string;
  destination_config: Record<string, unknown> | null;
  destination_secret_sealed: string | null;
}

export const DESTINATION_COLUMNS = 'destination, destination_config, destination_secret_sealed';

/** The destination a sender needs, its sealed URL opened. */
export function openDestination(secrets: SecretBox, r: StoredDestinationColumns): Destination {
  if (r.destination === 'webhook') return { kind: 'webhook', targetUrl: r.target_url };
  if (!isBrokerKind(r.destination) || !r.destination_secret_sealed)
    throw new Error(`subscription ${r.id} has an unknown destination ${r.destination}`);
  return {
    kind: r.destination,
    subscriptionId: r.id,
    secret: secrets.open(r.destination_secret_sealed),
    config: r.destination_config ?? {},
  };
}

/** The destination columns a write sets. */
export interface DestinationWrite {
  destination: string;
  targetUrl: string;
  config: Record<string, unknown> | null;
  secretSealed: string | null;
}

/**
 * Checks a written destination (and `target_url`, which only a webhook has) against the
 * outbound policy and turns it into columns, a broker's URL sealed. A change passes the
 * subscription's `current` columns: a broker destination of the current kind without `url`
 * keeps the stored URL (credentials included), and a `target_url` alone changes only a webhook.
 */
export function prepareDestination(
  deps: Pick<Deps, 'config' | 'secrets'>,
  destination: DestinationChange | undefined,
  targetUrl: string | undefined,
  current?: StoredDestinationColumns,
): Result<DestinationWrite> {
  const policy = deps.config.OUTBOUND_ADDRESS_POLICY;
  if (destination === undefined && current && current.destination !== 'webhook')
    return fail('VALIDATION_ERROR', `target_url is not used by a ${current.destination} destination; send a whole destination`, [
      { path: ['target_url'], message: 'not used by a broker destination' },
    ]);
  if (destination === undefined || destination.kind === 'webhook') {
    if (targetUrl === undefined)
      return fail('VALIDATION_ERROR', 'target_url is required for a webhook destination', [{ path: ['target_url'], message: 'required' }]);
    const url = checkTargetUrl(targetUrl, policy);
    if (!url.ok) return url;
    return ok({ destination: 'webhook', targetUrl: url.value.toString(), config: null, secretSealed: null });
  }
  if (targetUrl !== undefined)
    return fail('VALIDATION_ERROR', `target_url is not used by a ${destination.kind} destination; its URL is destination.url`, [
      { path: ['target_url'], message: 'not used by a broker destination' },
    ]);
  let url = destination.url;
  if (url === undefined) {
    if (current?.destination !== destination.kind || !current.destination_secret_sealed)
      return fail('VALIDATION_ERROR', `destination.url is required: the subscription has no ${destination.kind} URL to keep`, [
        { path: ['destination', 'url'], message: 'required unless the kind stays the same' },
      ]);
    url = deps.secrets.open(current.destination_secret_sealed);
  }
  const stored = DESTINATIONS[destination.kind].prepare({ ...destination, url }, policy);
  if (!stored.ok) return stored;
  const { config, secret, display } = stored.value;
  return ok({ destination: destination.kind, targetUrl: display, config, secretSealed: deps.secrets.seal(secret) });
}

/** The destination as REST shows it: the kind, and for a broker its settings and URL without credentials. */
export function publicDestination(r: { destination: string; target_url: string; destination_config: Record<string, unknown> | null }) {
  return (r.destination === 'webhook'
    ? { kind: 'webhook' }
    : { kind: r.destination, url: r.target_url, ...(r.destination_config ?? {}) }) as unknown as DestinationOutput;
}
