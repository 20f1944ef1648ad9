import { useCallback, useEffect, useState } from 'react';
import { Link } from 'wouter';
import { api, errorText } from '../api.ts';
import {
  destinationBody,
  DestinationInputs,
  destinationLine,
  destinationProblem,
  useDestinationDraft,
} from '../components/destination.tsx';
import { Badge, ErrorNote, Field, SecretOnce, Table } from '../components/ui.tsx';
import { matchingTypes, patternListProblem, splitPatterns } from '../patterns.ts';
import type { Answer, Subscription } from '../types.ts';

type NewSubscription = Answer<'createWebhook', 201>;

export function Webhooks() {
  const [subs, setSubs] = useState<Subscription[]>();
  const [error, setError] = useState<string>();
  const [creating, setCreating] = useState(false);
  const [created, setCreated] = useState<NewSubscription>();
  const load = useCallback(
    () =>
      api<Answer<'listWebhooks'>>('GET', '/v1/webhook-subscriptions').then(
        (r) => setSubs(r.data),
        (e) => setError(errorText(e)),
      ),
    [],
  );
  useEffect(() => void load(), [load]);

  return (
    <section aria-labelledby="wh-title">
      <div className="heading">
        <h1 id="wh-title">Webhooks</h1>
        <button type="button" onClick={() => setCreating((c) => !c)} aria-expanded={creating}>
          New webhook
        </button>
      </div>
      {creating ? (
        <CreateWebhook
          onCreated={(s) => {
            setCreating(false);
            setCreated(s);
            void load();
          }}
        />
      ) : null}
      {created?.secret ? (
        <SecretOnce title={`Signing secret of ${created.name}`} secret={created.secret}>
          <p>
            <Link href={`/webhooks/${created.id}`}>Open {created.name}</Link>
          </p>
        </SecretOnce>
      ) : null}
      <ErrorNote error={error} />
      {!subs ? (
        <p>Loading…</p>
      ) : subs.length === 0 ? (
        <p>
          No webhooks yet. A webhook posts every event matching its patterns to your URL, or publishes it to your message broker, signed
          with its secret.
        </p>
      ) : (
        <Table
          caption="Webhook subscriptions"
          head={
            <>
              <th scope="col">Name</th>
              <th scope="col">Destination</th>
              <th scope="col" className="wide-only">
                Patterns
              </th>
              <th scope="col">Status</th>
              <th scope="col" className="wide-only">
                Failures in a row
              </th>
            </>
          }
        >
          {subs.map((s) => (
            <tr key={s.id}>
              <td>
                <Link href={`/webhooks/${s.id}`}>{s.name}</Link>
              </td>
              <td className="clip">{destinationLine(s)}</td>
              <td className="wide-only">{s.event_patterns.join(', ')}</td>
              <td>
                <Badge tone={s.status.toLowerCase()}>{s.status}</Badge>
              </td>
              <td className="wide-only">{s.consecutive_failures}</td>
            </tr>
          ))}
        </Table>
      )}
    </section>
  );
}

function CreateWebhook({ onCreated }: { onCreated: (s: NewSubscription) => void }) {
  return (
    <WebhookForm
      label="New webhook"
      submitText="Create webhook"
      onSubmit={async ({ max_per_second, ...body }) =>
        onCreated(
          await api<NewSubscription>('POST', '/v1/webhook-subscriptions', {
            ...body,
            ...(max_per_second !== null ? { max_per_second } : {}),
          }),
        )
      }
    />
  );
}

/** What the webhook form sends: the fields a client sets on a subscription, its destination as the API takes it. */
export interface WebhookFields extends Record<string, unknown> {
  name: string;
  event_patterns: string[];
  /** Deliveries per second at most; null: no throttle. */
  max_per_second: number | null;
}

/** The form of a new webhook, and of an existing one's changes (`initial`). */
export function WebhookForm({
  label,
  submitText,
  initial,
  onSubmit,
}: {
  label: string;
  submitText: string;
  initial?: Subscription;
  onSubmit: (fields: WebhookFields) => Promise<void>;
}) {
  const [name, setName] = useState(initial?.name ?? '');
  const [destination, setDestination] = useDestinationDraft(initial);
  const [patterns, setPatterns] = useState(initial?.event_patterns.join(', ') ?? '');
  const [rate, setRate] = useState(initial?.max_per_second ? String(initial.max_per_second) : '');
  const [error, setError] = useState<string>();
  const [busy, setBusy] = useState(false);
  const list = splitPatterns(patterns);
  const problem = patterns ? patternListProblem(list) : undefined;
  const matches = matchingTypes(list);
  const urlProblem = destinationProblem(destination, initial);
  // The service's bounds (1 to 10,000): five digits alone would let 99,999 through to a 400.
  const rateProblem =
    rate && !(/^[1-9]\d{0,4}$/.test(rate.trim()) && Number(rate) <= 10_000) ? 'a whole number from 1 to 10000, or empty' : undefined;
  const ready = name.trim() && destination.url && list.length > 0 && !problem && !urlProblem && !rateProblem;
  return (
    <form
      className="card"
      aria-label={label}
      onSubmit={async (e) => {
        e.preventDefault();
        if (!ready) return;
        setBusy(true);
        setError(undefined);
        try {
          await onSubmit({
            name: name.trim(),
            ...destinationBody(destination, initial),
            event_patterns: list,
            max_per_second: rate.trim() ? Number(rate) : null,
          });
        } catch (err) {
          setError(errorText(err));
        } finally {
          setBusy(false);
        }
      }}
    >
      <Field id="wh-name" label="Name">
        <input id="wh-name" value={name} onChange={(e) => setName(e.currentTarget.value)} required />
      </Field>
      <DestinationInputs draft={destination} onChange={setDestination} initial={initial} problem={urlProblem} />
      <Field
        id="wh-patterns"
        label="Event patterns"
        problem={problem}
        hint={
          list.length && !problem
            ? matches.length
              ? `Matches ${matches.join(', ')}${list.some((p) => !p.includes('*') && !matches.includes(p)) ? ' and your custom types' : ''}`
              : 'Matches your custom event types only'
            : 'Exact types, prefix.* or *, separated by commas or spaces'
        }
      >
        <input
          id="wh-patterns"
          value={patterns}
          aria-invalid={problem ? true : undefined}
          aria-describedby={problem ? 'wh-patterns-problem' : 'wh-patterns-hint'}
          onChange={(e) => setPatterns(e.currentTarget.value)}
          placeholder="message.*"
        />
      </Field>
      <Field id="wh-rate" label="Deliveries per second at most" problem={rateProblem} hint="Empty: as fast as your receiver answers">
        <input id="wh-rate" inputMode="numeric" value={rate} onChange={(e) => setRate(e.currentTarget.value)} />
      </Field>
      <ErrorNote error={error} />
      <div className="actions">
        <button type="submit" disabled={!ready || busy}>
          {submitText}
        </button>
      </div>
    </form>
  );
}
