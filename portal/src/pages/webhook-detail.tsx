import { useCallback, useEffect, useState } from 'react';
import { Link, useLocation } from 'wouter';
import { api, errorText } from '../api.ts';
import { Badge, DeleteButton, ErrorNote, Field, Json, Notice, SecretOnce, when } from '../components/ui.tsx';
import type { Answer, DeliveryAttempt, Subscription } from '../types.ts';
import { answerOf, DestinationFacts } from '../components/destination.tsx';
import { WebhookForm } from './webhooks.tsx';

/** How often the open page re-reads the attempt log, so retries show up as they happen. */
const POLL_MS = 1_500;

interface Delivery {
  id: string;
  eventId: string;
  eventType: string;
  /** Newest first, as the log lists them. */
  attempts: DeliveryAttempt[];
}

/** The attempt log grouped by delivery: one delivery, its attempts newest first. */
function byDelivery(attempts: DeliveryAttempt[]): Delivery[] {
  const out = new Map<string, Delivery>();
  for (const a of attempts) {
    const key = a.delivery_id ?? a.id;
    const d = out.get(key) ?? { id: key, eventId: a.event_id, eventType: a.event_type, attempts: [] };
    d.attempts.push(a);
    out.set(key, d);
  }
  return [...out.values()];
}

export function WebhookDetail({ id }: { id: string }) {
  const [sub, setSub] = useState<Subscription>();
  const [log, setLog] = useState<DeliveryAttempt[]>([]);
  const [error, setError] = useState<string>();
  const [notice, setNotice] = useState<string>();
  const [rotated, setRotated] = useState<Answer<'rotateWebhookSecret'>>();
  const [editing, setEditing] = useState(false);
  const [, navigate] = useLocation();
  const path = `/v1/webhook-subscriptions/${encodeURIComponent(id)}`;

  const load = useCallback(async () => {
    const [s, page] = await Promise.all([
      api<Subscription>('GET', path),
      api<Answer<'listWebhookDeliveries'>>('GET', `${path}/deliveries?limit=100`),
    ]);
    setSub(s);
    setLog(page.data);
  }, [path]);

  useEffect(() => {
    let timer: ReturnType<typeof setTimeout>;
    let live = true;
    const tick = () =>
      load().then(
        () => live && (timer = setTimeout(tick, POLL_MS)),
        (e) => live && setError(errorText(e)),
      );
    void tick();
    return () => {
      live = false;
      clearTimeout(timer);
    };
  }, [load]);

  const act = async (what: () => Promise<string | undefined>) => {
    setError(undefined);
    setNotice(undefined);
    try {
      setNotice(await what());
      await load();
    } catch (e) {
      setError(errorText(e));
    }
  };

  if (!sub) return error ? <ErrorNote error={error} /> : <p>Loading…</p>;
  const paused = sub.status !== 'ACTIVE';
  return (
    <section aria-labelledby="sub-title">
      <p>
        <Link href="/webhooks">← Webhooks</Link>
      </p>
      <div className="heading">
        <h1 id="sub-title">{sub.name}</h1>
        <Badge tone={sub.status.toLowerCase()}>{sub.status}</Badge>
      </div>
      <dl className="facts">
        <DestinationFacts sub={sub} />
        <dt>Patterns</dt>
        <dd>{sub.event_patterns.join(', ')}</dd>
        <dt>Throttle</dt>
        <dd>{sub.max_per_second ? `${sub.max_per_second} deliveries per second at most` : 'none'}</dd>
        <dt>Failures in a row</dt>
        <dd>{sub.consecutive_failures}</dd>
        <dt>Previous secret</dt>
        <dd>{sub.previous_secret_expires_at ? `still signs until ${when(sub.previous_secret_expires_at)}` : 'none'}</dd>
      </dl>
      <div className="actions">
        <button type="button" className="ghost" onClick={() => setEditing((e) => !e)} aria-expanded={editing}>
          Edit
        </button>
        <button
          type="button"
          onClick={() =>
            act(async () => {
              await api('PATCH', path, { status: paused ? 'ACTIVE' : 'PAUSED' });
              return paused ? 'Resumed.' : 'Paused: new events wait until you resume.';
            })
          }
        >
          {paused ? 'Resume' : 'Pause'}
        </button>
        <button
          type="button"
          onClick={() =>
            act(async () => {
              const r = await api<Answer<'testWebhook'>>('POST', `${path}/test`);
              const answer = answerOf(sub.destination.kind, { ...r, status: r.success ? 'delivered' : 'failed' });
              return r.success
                ? `Test event delivered: ${answer} in ${r.duration} ms.`
                : `Test event failed: ${r.status_code ?? r.error_message ?? answer} after ${r.duration} ms.`;
            })
          }
        >
          Send test event
        </button>
        <button
          type="button"
          className="ghost"
          onClick={() =>
            act(async () => {
              setRotated(await api('POST', `${path}/rotate-secret`));
              return undefined;
            })
          }
        >
          Rotate secret
        </button>
        <DeleteButton
          question={`Delete ${sub.name} with its deliveries?`}
          onConfirmed={() =>
            act(async () => {
              await api('DELETE', path);
              navigate('/webhooks');
              return undefined;
            })
          }
        />
      </div>
      {editing ? (
        <WebhookForm
          label="Edit webhook"
          submitText="Save changes"
          initial={sub}
          onSubmit={async (fields) => {
            await api('PATCH', path, fields);
            setEditing(false);
            await act(async () => 'Saved.');
          }}
        />
      ) : null}
      <Notice text={notice} />
      <ErrorNote error={error} />
      {rotated ? (
        <SecretOnce title="New signing secret" secret={rotated.secret}>
          <p>The previous secret keeps signing beside it until {when(rotated.previous_secret_expires_at)}, so receivers can switch over.</p>
        </SecretOnce>
      ) : null}
      <Replay path={path} onDone={(n) => act(async () => n)} />
      <h2>Deliveries</h2>
      <Deliveries kind={sub.destination.kind} log={log} onRetry={(deliveryId) => act(async () => retry(deliveryId))} />
    </section>
  );
}

async function retry(deliveryId: string): Promise<string> {
  await api('POST', `/v1/webhook-deliveries/${encodeURIComponent(deliveryId)}/retry`);
  return 'Delivery queued again.';
}

function Replay({ path, onDone }: { path: string; onDone: (notice: string) => void }) {
  const [since, setSince] = useState('');
  const [error, setError] = useState<string>();
  return (
    <form
      className="card inline"
      aria-label="Replay"
      onSubmit={async (e) => {
        e.preventDefault();
        setError(undefined);
        try {
          const r = await api<Answer<'replayWebhook', 202>>('POST', `${path}/replay`, { since: toSince(since) });
          onDone(
            `Replay queued ${r.queued} deliver${r.queued === 1 ? 'y' : 'ies'} (${r.already_queued} already queued, ${r.scanned} events looked at)` +
              (r.truncated ? `; more remain: replay again from ${r.next_since}.` : '.'),
          );
        } catch (err) {
          setError(errorText(err));
        }
      }}
    >
      <Field id="replay-since" label="Replay events since" hint="A time (2026-01-31 12:00) or an event cursor">
        <input id="replay-since" value={since} onChange={(e) => setSince(e.currentTarget.value)} required />
      </Field>
      <button type="submit">Replay</button>
      <ErrorNote error={error} />
    </form>
  );
}

/** A local date-time typed in the box becomes ISO 8601; anything else (a cursor, an ISO time) is sent as typed. */
function toSince(text: string): string {
  const t = text.trim();
  if (/^\d{4}-\d{2}-\d{2}([ T]\d{2}:\d{2}(:\d{2})?)?$/.test(t)) return new Date(t.replace(' ', 'T')).toISOString();
  return t;
}

/** The log grouped by delivery; a broker's attempts show its confirm or error where a webhook's show the HTTP answer. */
function Deliveries({ kind, log, onRetry }: { kind: string; log: DeliveryAttempt[]; onRetry: (deliveryId: string) => void }) {
  const deliveries = byDelivery(log);
  const broker = kind !== 'webhook';
  if (deliveries.length === 0) return <p>No deliveries yet.</p>;
  return (
    <ul className="deliveries">
      {deliveries.map((d) => {
        const last = d.attempts[0];
        return (
          <li key={d.id} className="card" data-delivery-id={d.id}>
            <details>
              <summary>
                <Badge tone={last.status}>{last.status}</Badge> <span className="type">{d.eventType}</span> · {d.attempts.length} attempt
                {d.attempts.length === 1 ? '' : 's'} · last answer {answerOf(kind, last)} · {when(last.created_at)}
              </summary>
              {last.status === 'failed' ? (
                <button type="button" className="small" onClick={() => onRetry(d.id)}>
                  Retry now
                </button>
              ) : null}
              <ol className="attempts">
                {d.attempts.map((a) => (
                  <li key={a.id} data-testid="attempt">
                    <p>
                      Attempt {a.attempt_count} at {when(a.created_at)}: <strong>{answerOf(kind, a)}</strong> in {a.duration} ms
                      {a.error_message ? ` (${a.error_message})` : ''}
                      {a.next_retry_at ? <> · next attempt at {when(a.next_retry_at)}</> : null}
                    </p>
                    {a.request_headers ? (
                      <Headers title={broker ? 'Message headers' : 'Request headers'} headers={a.request_headers} />
                    ) : null}
                    <h4>{broker ? 'Message body' : 'Request body'}</h4>
                    <Json value={pretty(a.request_body)} />
                    {broker ? null : (
                      <>
                        {a.response_headers ? <Headers title="Response headers" headers={a.response_headers} /> : null}
                        <h4>Response body</h4>
                        <Json value={a.response_body ?? '(none)'} />
                      </>
                    )}
                  </li>
                ))}
              </ol>
            </details>
          </li>
        );
      })}
    </ul>
  );
}

function pretty(body: string): string {
  try {
    return JSON.stringify(JSON.parse(body), null, 2);
  } catch {
    return body;
  }
}

function Headers({ title, headers }: { title: string; headers: Record<string, string | string[]> }) {
  return (
    <details className="headers">
      <summary>{title}</summary>
      <Json
        value={Object.entries(headers)
          .map(([k, v]) => `${k}: ${Array.isArray(v) ? v.join(', ') : v}`)
          .join('\n')}
      />
    </details>
  );
}
