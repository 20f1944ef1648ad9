import { useVirtualizer } from '@tanstack/react-virtual';
import { useRef, useState } from 'react';
import { type EventFilter, FilterForm, NO_FILTER } from '../components/filter-form.tsx';
import { type StreamState, useEventStream } from '../live/use-event-stream.ts';
import type { StreamEvent } from '../types.ts';
import { EventDetail } from './event-detail.tsx';

const ROW_HEIGHT = 34;

export function Live() {
  const [filter, setFilter] = useState<EventFilter>(NO_FILTER);
  const [paused, setPaused] = useState(false);
  const { rows, held, state, ended, reconnects } = useEventStream(filter, paused);
  const [selected, setSelected] = useState<string>();

  return (
    <section className="split" aria-labelledby="live-title">
      <div className="pane">
        <h1 id="live-title">Live events</h1>
        <FilterForm value={filter} onApply={setFilter} submitLabel="Apply filter" />
        <p className="status-line" aria-live="polite">
          <span className={`dot ${state}`} aria-hidden="true" /> <span data-testid="stream-state">{stateText[state]}</span>
          {' · '}
          <span data-testid="row-count">{rows.length.toLocaleString()}</span> event{rows.length === 1 ? '' : 's'}
          {reconnects ? (
            <>
              {' · resumed '}
              <span data-testid="reconnects">{reconnects}</span> time{reconnects === 1 ? '' : 's'}
            </>
          ) : null}
          {ended ? ` · ${ended}` : ''}
          {held ? ` · ${held.toLocaleString()} new while paused` : ''}{' '}
          <button type="button" className="small ghost" aria-pressed={paused} onClick={() => setPaused((p) => !p)}>
            {paused ? 'Resume' : 'Pause'}
          </button>
        </p>
        <EventRows rows={rows} selected={selected} onSelect={setSelected} />
      </div>
      <div className="pane side">
        {selected ? (
          <EventDetail id={selected} onOpen={setSelected} />
        ) : (
          <p className="muted">Select an event to see its payload, edges and deliveries.</p>
        )}
      </div>
    </section>
  );
}

const stateText: Record<StreamState, string> = {
  connecting: 'Connecting',
  live: 'Live',
  reconnecting: 'Reconnecting',
  ended: 'Ended',
};

/** Only the rows in view are in the page, so ten thousand of them scroll like ten. */
function EventRows({ rows, selected, onSelect }: { rows: StreamEvent[]; selected?: string; onSelect: (id: string) => void }) {
  const scroller = useRef<HTMLElement>(null);
  const virtual = useVirtualizer({
    count: rows.length,
    getScrollElement: () => scroller.current,
    estimateSize: () => ROW_HEIGHT,
    overscan: 12,
    getItemKey: (i) => rows[i].id,
  });
  return (
    <section ref={scroller} className="rows" aria-label="Events, newest first">
      <ul className="rows-inner" style={{ height: virtual.getTotalSize() }}>
        {virtual.getVirtualItems().map((item) => {
          const e = rows[item.index];
          return (
            <li key={item.key} className="row-slot" style={{ transform: `translateY(${item.start}px)`, height: ROW_HEIGHT }}>
              <button
                type="button"
                className={`row${e.id === selected ? ' selected' : ''}`}
                aria-pressed={e.id === selected}
                data-event-type={e.eventType}
                onClick={() => onSelect(e.id)}
              >
                <time dateTime={e.createdAt}>{new Date(e.createdAt).toLocaleTimeString()}</time>
                <span className="type">{e.eventType}</span>
                <span className="summary">{JSON.stringify(e.payload).slice(0, 120)}</span>
              </button>
            </li>
          );
        })}
      </ul>
    </section>
  );
}
