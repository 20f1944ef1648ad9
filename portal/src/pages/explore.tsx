import { useEffect, useMemo, useState } from 'react';
import { api, errorText, qs } from '../api.ts';
import { CopyButton, ErrorNote, Field, Table, when } from '../components/ui.tsx';
import { useSession } from '../session.tsx';
import type { Answer, RestEvent } from '../types.ts';
import { EventDetail } from './event-detail.tsx';
import { type EventFilter, FilterForm, NO_FILTER } from '../components/filter-form.tsx';

const PAGE = 25;

type Order = 'desc' | 'asc';

/**
 * One page of GET /v1/events with the stream's filters: newest first paging back (`before`),
 * or oldest first paging forward (`after`), from any cursor. The query is also shown as the
 * curl line that reproduces it.
 */
function buildQuery(appId: string, f: EventFilter, order: Order, cursor: string): { path: string; curl: string } | string {
  const types = f.eventTypes.split(',').filter(Boolean);
  if (types.length > 1 || types.some((t) => t !== '*' && !/^[a-z0-9_.]+\*?$/.test(t)))
    return 'Explore filters by one type or one prefix ending in * (such as message.*)';
  const path = `/v1/events${qs({
    event_type: types[0] === '*' ? undefined : types[0],
    conversation_id: f.conversationId,
    user_id: f.userId,
    order,
    [order === 'desc' ? 'before' : 'after']: cursor,
    limit: PAGE,
  })}`;
  return {
    path,
    curl: `curl -s '${window.location.origin}${path}' -H "Authorization: Bearer $API_KEY" -H 'X-Service-App-ID: ${appId}'`,
  };
}

export function Explore() {
  const [filter, setFilter] = useState<EventFilter>(NO_FILTER);
  const [cursor, setCursor] = useState('');
  const [from, setFrom] = useState('');
  /** The cursors of the pages read before this one, so Previous page can return to them. */
  const [back, setBack] = useState<string[]>([]);
  const goTo = (to: string, history: string[]) => {
    setCursor(to);
    setFrom(to);
    setBack(history);
  };
  const [events, setEvents] = useState<RestEvent[]>();
  const [next, setNext] = useState<string>();
  const [error, setError] = useState<string>();
  const [selected, setSelected] = useState<string>();
  const [order, setOrder] = useState<Order>('desc');
  const { application_id: appId } = useSession();
  const query = useMemo(() => buildQuery(appId, filter, order, cursor), [appId, filter, order, cursor]);

  useEffect(() => {
    if (typeof query === 'string') return setError(query);
    let live = true;
    setError(undefined);
    setEvents(undefined);
    api<Answer<'listEvents'>>('GET', query.path).then(
      (r) => {
        if (!live) return;
        setEvents(r.data);
        setNext(r.has_more ? (r.next_cursor ?? undefined) : undefined);
      },
      (e) => live && setError(errorText(e)),
    );
    return () => {
      live = false;
    };
  }, [query]);

  return (
    <section className="split" aria-labelledby="explore-title">
      <div className="pane">
        <h1 id="explore-title">Explore</h1>
        <FilterForm
          value={filter}
          onApply={(f) => {
            setFilter(f);
            goTo('', []);
          }}
          submitLabel="Search"
        />
        <form
          className="card inline"
          aria-label="Start position"
          onSubmit={(e) => {
            e.preventDefault();
            goTo(from.trim(), []);
          }}
        >
          <Field id="ex-order" label="Order">
            <select
              id="ex-order"
              value={order}
              onChange={(e) => {
                setOrder(e.currentTarget.value as Order);
                goTo('', []);
              }}
            >
              <option value="desc">Newest first</option>
              <option value="asc">Oldest first</option>
            </select>
          </Field>
          <Field
            id="ex-after"
            label={order === 'desc' ? 'Start before cursor' : 'Start after cursor'}
            hint="Empty: from the newest (or oldest) event"
          >
            <input id="ex-after" value={from} onChange={(e) => setFrom(e.currentTarget.value)} />
          </Field>
          <button type="submit">Go</button>
        </form>
        <ErrorNote error={error} />
        {typeof query !== 'string' ? (
          <p className="curl">
            <code className="clip" data-testid="curl">
              {query.curl}
            </code>{' '}
            <CopyButton text={query.curl} label="Copy curl" />
          </p>
        ) : null}
        {events ? (
          <Table
            caption="Events in ledger order"
            head={
              <>
                <th scope="col">Created</th>
                <th scope="col">Type</th>
                <th scope="col">Cursor</th>
              </>
            }
          >
            {events.map((e) => (
              <tr key={e.id}>
                <td>{when(e.created_at)}</td>
                <td>
                  <button type="button" className="linkish type" onClick={() => setSelected(e.id)}>
                    {e.event_type}
                  </button>
                </td>
                <td>
                  <CopyButton text={e.cursor} label="Copy cursor" />
                </td>
              </tr>
            ))}
          </Table>
        ) : null}
        {events && events.length === 0 ? <p>No events match.</p> : null}
        <div className="actions">
          {back.length ? (
            <button type="button" className="ghost" onClick={() => goTo(back.at(-1)!, back.slice(0, -1))}>
              Previous page
            </button>
          ) : null}
          {next ? (
            <button type="button" onClick={() => goTo(next, [...back, cursor])}>
              Next page
            </button>
          ) : null}
        </div>
      </div>
      <div className="pane side">
        {selected ? <EventDetail id={selected} onOpen={setSelected} /> : <p className="muted">Select an event to see it in full.</p>}
      </div>
    </section>
  );
}
