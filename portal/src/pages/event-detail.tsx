import { useEffect, useState } from 'react';
import { Link } from 'wouter';
import { api, errorText } from '../api.ts';
import { answerOf } from '../components/destination.tsx';
import { Badge, CopyButton, ErrorNote, Json, when } from '../components/ui.tsx';
import { canOpen, useSession } from '../session.tsx';
import type { Answer, DeliveryAttempt, RestEvent, Subscription } from '../types.ts';

interface Caused {
  subscription: Subscription;
  attempts: DeliveryAttempt[];
}

/**
 * One event: payload, edges, the event it follows from, and the webhook deliveries it caused
 * (GET /v1/webhook-deliveries?event_id=, one per subscription it matched, each with its attempts)
 * where the session may open webhooks: an events-only embed may not, so it is not asked.
 */
export function EventDetail({ id, onOpen }: { id: string; onOpen: (id: string) => void }) {
  const showsDeliveries = canOpen(useSession().areas, 'webhooks');
  const [event, setEvent] = useState<RestEvent>();
  const [origin, setOrigin] = useState<RestEvent>();
  const [caused, setCaused] = useState<Caused[]>();
  const [error, setError] = useState<string>();

  useEffect(() => {
    let live = true;
    setEvent(undefined);
    setOrigin(undefined);
    setCaused(undefined);
    setError(undefined);
    (async () => {
      const e = await api<RestEvent>('GET', `/v1/events/${encodeURIComponent(id)}`);
      if (!live) return;
      setEvent(e);
      if (e.origin_event_id)
        api<RestEvent>('GET', `/v1/events/${encodeURIComponent(e.origin_event_id)}`).then(
          (o) => live && setOrigin(o),
          () => undefined,
        );
      if (!showsDeliveries) return;
      const [subs, deliveries] = await Promise.all([
        api<Answer<'listWebhooks'>>('GET', '/v1/webhook-subscriptions'),
        api<Answer<'listEventDeliveries'>>('GET', `/v1/webhook-deliveries?event_id=${encodeURIComponent(id)}`),
      ]);
      const found = await Promise.all(
        deliveries.data.map(async (d) => {
          const detail = await api<Answer<'getWebhookDelivery'>>('GET', `/v1/webhook-deliveries/${encodeURIComponent(d.id)}`);
          const subscription = subs.data.find((s) => s.id === d.subscription_id);
          return subscription ? [{ subscription, attempts: detail.attempts }] : [];
        }),
      );
      if (live) setCaused(found.flat().filter((c) => c.attempts.length > 0));
    })().catch((e) => live && setError(errorText(e)));
    return () => {
      live = false;
    };
  }, [id, showsDeliveries]);

  if (error) return <ErrorNote error={error} />;
  if (!event) return <p aria-live="polite">Loading event…</p>;
  return (
    <article className="detail" aria-labelledby="event-title">
      <h2 id="event-title">{event.event_type}</h2>
      <dl className="facts">
        <dt>Id</dt>
        <dd>
          <code>{event.id}</code>
        </dd>
        <dt>Created</dt>
        <dd>{when(event.created_at)}</dd>
        <dt>Cursor</dt>
        <dd>
          <code className="clip">{event.cursor}</code> <CopyButton text={event.cursor} label="Copy cursor" />
        </dd>
        {event.conversation_id ? (
          <>
            <dt>Conversation</dt>
            <dd>
              <code>{event.conversation_id}</code>
            </dd>
          </>
        ) : null}
        <dt>Origin</dt>
        <dd>
          {event.origin_event_id ? (
            <button type="button" className="linkish" onClick={() => onOpen(event.origin_event_id!)}>
              {origin ? origin.event_type : 'event'} <code>{event.origin_event_id.slice(0, 8)}</code>
            </button>
          ) : (
            'none'
          )}
        </dd>
      </dl>
      <h3>Payload</h3>
      <Json value={event.payload} />
      <h3>Edges</h3>
      {event.edges.length === 0 ? (
        <p>No edges.</p>
      ) : (
        <table>
          <thead>
            <tr>
              <th scope="col">Relation</th>
              <th scope="col">Target</th>
              <th scope="col">Id</th>
            </tr>
          </thead>
          <tbody>
            {event.edges.map((e) => (
              <tr key={`${e.edge_type}:${e.target_node_id}`}>
                <td>{e.edge_type}</td>
                <td>{e.target_node_type}</td>
                <td>
                  <code>{e.target_node_id}</code>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {showsDeliveries ? <h3>Webhook deliveries</h3> : null}
      {!showsDeliveries ? null : !caused ? (
        <p>Looking for deliveries…</p>
      ) : caused.length === 0 ? (
        <p>This event caused no webhook delivery.</p>
      ) : (
        <ul className="plain">
          {caused.map(({ subscription, attempts }) => (
            <li key={subscription.id}>
              <Link href={`/webhooks/${subscription.id}`}>{subscription.name}</Link>:{' '}
              <Badge tone={attempts[0].status}>{attempts[0].status}</Badge> {attempts.length} attempt{attempts.length === 1 ? '' : 's'},
              last answer {answerOf(subscription.destination.kind, attempts[0])}
            </li>
          ))}
        </ul>
      )}
    </article>
  );
}
