import { useState } from 'react';
import schemas from '../generated/destination-schemas.json';
import { fieldLabel, jsPattern, type ObjectSchema } from '../schema-fields.ts';
import type { DeliveryAttempt, Subscription } from '../types.ts';
import { Field } from './ui.tsx';

/**
 * Each broker kind's REST `destination` as JSON Schema, generated at build time from the
 * service's registry (src/destinations/registry.ts): a kind added there gets its fields here.
 */
const BROKER_SCHEMAS = schemas as Record<string, ObjectSchema>;
const DESTINATION_KINDS = ['webhook', ...Object.keys(BROKER_SCHEMAS)];

/**
 * A kind's settings the form draws as fields: its input's properties but the kind, the URL and
 * its credentials (typed as User and Password beside the URL, never shown back).
 */
const settingsOf = (kind: string) =>
  Object.entries(BROKER_SCHEMAS[kind]?.properties ?? {}).filter(([k]) => k !== 'kind' && k !== 'url' && k !== 'credentials');

/**
 * Whether the kind takes a user and password as a `credentials` object of its own (NATS),
 * rather than in its URL (RabbitMQ): its input schema has a `user_password` credentials variant.
 */
const takesCredentialsApart = (kind: string): boolean =>
  JSON.stringify(BROKER_SCHEMAS[kind]?.properties?.credentials ?? {}).includes('"user_password"');

/** A destination's shown values by name (a broker's URL without credentials and its settings). */
const shownOf = (sub: Subscription | undefined) => (sub?.destination ?? {}) as Record<string, unknown>;

/** A broker kind goes by its API name (`rabbitmq`), as the list and the API show it. */
const kindLabel = (kind: string) => (kind === 'webhook' ? 'webhook (HTTP POST to your URL)' : `${kind} (publish to your broker)`);

/** Where a subscription delivers, in one line: its URL, and a broker's kind before it. */
export const destinationLine = (sub: Subscription) =>
  sub.destination.kind === 'webhook' ? sub.target_url : `${sub.destination.kind} · ${sub.target_url}`;

/** The destination's facts for the subscription page: kind, URL (never credentials), a broker's settings. */
export function DestinationFacts({ sub }: { sub: Subscription }) {
  const shown = shownOf(sub);
  return (
    <>
      <dt>Destination</dt>
      <dd data-testid="destination-kind">{kindLabel(sub.destination.kind)}</dd>
      <dt>URL</dt>
      <dd className="clip">{sub.target_url}</dd>
      {Object.entries(shown)
        .filter(([k]) => k !== 'kind' && k !== 'url')
        .map(([k, v]) => (
          <Setting key={k} name={fieldLabel(k)} value={v} />
        ))}
    </>
  );
}

const Setting = ({ name, value }: { name: string; value: unknown }) => (
  <>
    <dt>{name}</dt>
    <dd>
      <code>{value === '' ? '""' : String(value)}</code>
    </dd>
  </>
);

/**
 * What one attempt came to: a webhook's HTTP status, a broker's confirm or its error (a broker
 * answers with no status and no body).
 */
export function answerOf(kind: string, a: Pick<DeliveryAttempt, 'status' | 'status_code' | 'error_message'>): string {
  if (kind === 'webhook') return a.status_code === null ? 'no answer' : String(a.status_code);
  return a.status === 'delivered' ? 'confirmed by the broker' : 'not confirmed';
}

/** The form's destination state and the part of a create or change body it makes. */
export interface DestinationDraft {
  kind: string;
  /** A webhook's endpoint, or a broker's URL without credentials. */
  url: string;
  user: string;
  password: string;
  settings: Record<string, string>;
}

export function useDestinationDraft(initial: Subscription | undefined) {
  const shown = shownOf(initial);
  const start = initial?.destination.kind ?? 'webhook';
  const [draft, setDraft] = useState<DestinationDraft>({
    kind: start,
    url: initial?.target_url ?? '',
    user: '',
    password: '',
    settings: settingsFor(start, shown),
  });
  return [draft, setDraft] as const;
}

function settingsFor(kind: string, shown: Record<string, unknown>): Record<string, string> {
  return Object.fromEntries(
    settingsOf(kind).map(([k, p]) => [k, shown.kind === kind && shown[k] !== undefined ? String(shown[k]) : String(p.default ?? '')]),
  );
}

/** Whether a change keeps the stored broker URL: same kind, same URL, no credentials typed. */
const keepsUrl = (d: DestinationDraft, initial: Subscription | undefined) =>
  initial?.destination.kind === d.kind && d.url === initial.target_url && !d.user && !d.password;

/** The URL with the credentials typed beside it (each percent-encoded by URL). */
function withCredentials(url: string, user: string, password: string): string {
  if (!user && !password) return url;
  try {
    const u = new URL(url);
    u.username = user;
    u.password = password;
    return u.toString();
  } catch {
    return url;
  }
}

/** Inputs hold text; a setting the schema types as a number or boolean goes as one. */
const typed = (type: string | undefined, v: string): unknown =>
  type === 'integer' || type === 'number' ? Number(v) : type === 'boolean' ? v === 'true' : v;

/** A problem the form can see before asking the service; the service's own answer is shown as it comes. */
export function destinationProblem(d: DestinationDraft, initial: Subscription | undefined): string | undefined {
  if (d.kind === 'webhook') return d.url && !/^https?:\/\/\S+$/.test(d.url) ? 'an http(s) URL' : undefined;
  if (keepsUrl(d, initial)) return undefined;
  return d.url && !/^[a-z][a-z0-9+.-]*:\/\/\S+$/i.test(d.url)
    ? `a ${d.kind} URL such as ${d.kind === 'rabbitmq' ? 'amqps://' : `${d.kind}://`}host`
    : undefined;
}

/**
 * The body's destination part. A webhook that stays one sends only `target_url`; a broker of the
 * kind it was, with its URL unchanged and no credentials typed, leaves `url` out so the service
 * keeps the stored one (credentials are write-only: blank means unchanged).
 */
export function destinationBody(d: DestinationDraft, initial: Subscription | undefined): Record<string, unknown> {
  if (d.kind === 'webhook')
    return initial && initial.destination.kind !== 'webhook'
      ? { destination: { kind: 'webhook' }, target_url: d.url }
      : { target_url: d.url };
  const required = new Set(BROKER_SCHEMAS[d.kind]?.required ?? []);
  const props = BROKER_SCHEMAS[d.kind]?.properties ?? {};
  const settings = Object.fromEntries(
    Object.entries(d.settings)
      .filter(([k, v]) => v !== '' || required.has(k))
      .map(([k, v]) => [k, typed(props[k]?.type, v)]),
  );
  return {
    destination: {
      kind: d.kind,
      ...(keepsUrl(d, initial)
        ? {}
        : takesCredentialsApart(d.kind)
          ? {
              url: d.url.trim(),
              ...(d.user || d.password ? { credentials: { type: 'user_password', user: d.user, password: d.password } } : {}),
            }
          : { url: withCredentials(d.url.trim(), d.user, d.password) }),
      ...settings,
    },
  };
}

/** The write-only parts of a broker URL, typed beside it. */
const CREDENTIALS = [
  { key: 'user', label: 'User', type: 'text' },
  { key: 'password', label: 'Password', type: 'password' },
] as const;

/** The destination's inputs: the kind, then the fields that kind takes. */
export function DestinationInputs({
  draft: d,
  onChange,
  initial,
  problem,
}: {
  draft: DestinationDraft;
  onChange: (d: DestinationDraft) => void;
  initial: Subscription | undefined;
  problem: string | undefined;
}) {
  const editingBroker = initial?.destination.kind === d.kind && d.kind !== 'webhook';
  return (
    <>
      <Field id="wh-kind" label="Destination">
        <select
          id="wh-kind"
          value={d.kind}
          onChange={(e) => {
            const kind = e.currentTarget.value;
            const back = initial?.destination.kind === kind;
            onChange({ kind, url: back ? initial.target_url : '', user: '', password: '', settings: settingsFor(kind, shownOf(initial)) });
          }}
        >
          {DESTINATION_KINDS.map((k) => (
            <option key={k} value={k}>
              {kindLabel(k)}
            </option>
          ))}
        </select>
      </Field>
      <Field
        id="wh-url"
        label={d.kind === 'webhook' ? 'Endpoint URL' : 'Broker URL'}
        problem={problem}
        hint={
          d.kind === 'webhook'
            ? 'Your receiver; it answers 2xx within 30 s to acknowledge'
            : 'Without user and password: those go below and are never shown again'
        }
      >
        <input
          id="wh-url"
          type={d.kind === 'webhook' ? 'url' : 'text'}
          value={d.url}
          onChange={(e) => onChange({ ...d, url: e.currentTarget.value })}
          required
          autoComplete="off"
          placeholder={d.kind === 'webhook' ? 'https://example.com/hooks' : undefined}
        />
      </Field>
      {d.kind === 'webhook' ? null : (
        <>
          <div className="field-pair">
            {CREDENTIALS.map(({ key, label, type }) => (
              <Field key={key} id={`wh-broker-${key}`} label={label}>
                <input
                  id={`wh-broker-${key}`}
                  type={type}
                  value={d[key]}
                  autoComplete={type === 'password' ? 'new-password' : 'off'}
                  aria-describedby="wh-credentials-hint"
                  onChange={(e) => onChange({ ...d, [key]: e.currentTarget.value })}
                />
              </Field>
            ))}
          </div>
          <p id="wh-credentials-hint" className="hint">
            <small>
              {editingBroker
                ? 'Write-only. Blank keeps the current ones while the URL stays the same; a changed URL takes the ones given here.'
                : 'Write-only: stored encrypted with the URL, never shown again.'}
            </small>
          </p>
          {settingsOf(d.kind).map(([key, p]) => (
            <Field key={`${d.kind}.${key}`} id={`wh-dest-${key}`} label={fieldLabel(key)} hint={p.description}>
              {p.enum || p.type === 'boolean' ? (
                <select
                  id={`wh-dest-${key}`}
                  value={d.settings[key] ?? ''}
                  onChange={(e) => onChange({ ...d, settings: { ...d.settings, [key]: e.currentTarget.value } })}
                >
                  <option value="">—</option>
                  {(p.enum ?? ['true', 'false']).map((v) => (
                    <option key={v}>{v}</option>
                  ))}
                </select>
              ) : (
                <input
                  id={`wh-dest-${key}`}
                  type={p.type === 'integer' || p.type === 'number' ? 'number' : 'text'}
                  value={d.settings[key] ?? ''}
                  pattern={p.pattern ? jsPattern(p.pattern) : undefined}
                  placeholder={p.default === undefined ? undefined : String(p.default)}
                  onChange={(e) => onChange({ ...d, settings: { ...d.settings, [key]: e.currentTarget.value } })}
                />
              )}
            </Field>
          ))}
        </>
      )}
    </>
  );
}
