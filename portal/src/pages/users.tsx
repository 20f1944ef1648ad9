import { useEffect, useState } from 'react';
import { api, errorText, qs } from '../api.ts';
import { Badge, ErrorNote, Field, Notice, SecretOnce, when } from '../components/ui.tsx';
import type { Answer, RestEvent, User, UserDetail } from '../types.ts';
import schemas from '../generated/platform-schemas.json';

const PLATFORMS = Object.keys(schemas);

export function Users() {
  const [platform, setPlatform] = useState('');
  const [externalId, setExternalId] = useState('');
  const [name, setName] = useState('');
  const [found, setFound] = useState<User[]>();
  const [error, setError] = useState<string>();
  const [selected, setSelected] = useState<string>();
  const search = async () => {
    setError(undefined);
    try {
      const r = await api<Answer<'listUsers'>>(
        'GET',
        `/v1/users${qs({ platform, external_id: externalId.trim(), name_contains: name.trim() })}`,
      );
      setFound(r.data);
      if (r.data.length === 1) setSelected(r.data[0].id);
    } catch (e) {
      setError(errorText(e));
    }
  };
  return (
    <section className="split" aria-labelledby="users-title">
      <div className="pane">
        <h1 id="users-title">Users and conversations</h1>
        <form
          className="filters"
          aria-label="Find a user"
          onSubmit={(e) => {
            e.preventDefault();
            void search();
          }}
        >
          <Field id="u-platform" label="Platform">
            <select id="u-platform" value={platform} onChange={(e) => setPlatform(e.currentTarget.value)}>
              <option value="">Any</option>
              {PLATFORMS.map((p) => (
                <option key={p} value={p}>
                  {p}
                </option>
              ))}
            </select>
          </Field>
          <Field id="u-external" label="Platform id">
            <input id="u-external" value={externalId} onChange={(e) => setExternalId(e.currentTarget.value)} />
          </Field>
          <Field id="u-name" label="Name contains">
            <input id="u-name" value={name} onChange={(e) => setName(e.currentTarget.value)} />
          </Field>
          <div className="actions">
            <button type="submit">Find</button>
          </div>
        </form>
        <ErrorNote error={error} />
        {found?.length === 0 ? <p>No user matches.</p> : null}
        <ul className="plain">
          {found?.map((u) => (
            <li key={u.id}>
              <button type="button" className="linkish" onClick={() => setSelected(u.id)}>
                {u.name ?? 'unnamed'}
              </button>{' '}
              {u.platform_users.map((p) => `${p.platform.toLowerCase()}:${p.external_id}`).join(', ')}
            </li>
          ))}
        </ul>
      </div>
      <div className="pane side">
        {selected ? <UserPanel id={selected} onMerged={search} /> : <p className="muted">Find a user to see them.</p>}
      </div>
    </section>
  );
}

function UserPanel({ id, onMerged }: { id: string; onMerged: () => void }) {
  const [user, setUser] = useState<UserDetail>();
  const [events, setEvents] = useState<RestEvent[]>([]);
  const [error, setError] = useState<string>();
  const [code, setCode] = useState<Answer<'createLinkCode', 201>>();
  const [source, setSource] = useState('');
  const [notice, setNotice] = useState<string>();
  const [version, setVersion] = useState(0);

  // biome-ignore lint/correctness/useExhaustiveDependencies: `version` re-reads after a merge
  useEffect(() => {
    let live = true;
    setCode(undefined);
    Promise.all([api<UserDetail>('GET', `/v1/users/${id}`), api<Answer<'listUserEvents'>>('GET', `/v1/users/${id}/events?limit=50`)]).then(
      ([u, e]) => {
        if (!live) return;
        setUser(u);
        setEvents(e.data);
      },
      (e) => live && setError(errorText(e)),
    );
    return () => {
      live = false;
    };
  }, [id, version]);

  if (!user) return error ? <ErrorNote error={error} /> : <p>Loading…</p>;
  return (
    <article aria-labelledby="user-title">
      <h2 id="user-title">{user.name ?? 'Unnamed user'}</h2>
      <dl className="facts">
        <dt>Id</dt>
        <dd>
          <code>{user.id}</code>
        </dd>
        <dt>Since</dt>
        <dd>{when(user.created_at)}</dd>
      </dl>
      <h3>Platform accounts</h3>
      <ul className="plain">
        {user.platform_users.map((p) => (
          <li key={p.id}>
            {p.platform} <code>{p.external_id}</code> {p.name ?? ''} {p.is_system_user ? <Badge tone="">system</Badge> : null}
          </li>
        ))}
      </ul>
      <h3>Conversations</h3>
      {user.conversations.length === 0 ? <p>None.</p> : null}
      <ul className="plain">
        {user.conversations.map((c) => (
          <li key={c.id}>
            {c.platform} {c.name ?? c.external_id} · <code>{c.id}</code> · last event {when(c.last_event_at)}
          </li>
        ))}
      </ul>
      <h3>Recent events</h3>
      {events.length === 0 ? <p>None.</p> : null}
      <ul className="plain">
        {events.map((e) => (
          <li key={e.id}>
            <span className="type">{e.event_type}</span> {when(e.created_at)}
          </li>
        ))}
      </ul>
      <h3>Link another account</h3>
      <button
        type="button"
        onClick={async () => {
          try {
            setCode(await api('POST', '/v1/link-codes', { user_id: user.id }));
          } catch (e) {
            setError(errorText(e));
          }
        }}
      >
        Generate link code
      </button>
      {code ? (
        <SecretOnce title={`Link code (until ${when(code.expires_at)})`} secret={code.code}>
          <ul className="plain">
            {code.deep_links.map((l) => (
              <li key={l.url}>
                {l.platform}: <a href={l.url}>{l.url}</a>
              </li>
            ))}
          </ul>
        </SecretOnce>
      ) : null}
      <h3>Merge</h3>
      <form
        className="card inline"
        aria-label="Merge a user into this one"
        onSubmit={async (e) => {
          e.preventDefault();
          if (!window.confirm('Merge that user into this one? Its accounts move here and it is gone afterwards.')) return;
          try {
            await api('POST', `/v1/users/${user.id}/merge`, { source_user_id: source.trim() });
            setNotice('Merged.');
            setSource('');
            setVersion((v) => v + 1);
            onMerged();
          } catch (err) {
            setError(errorText(err));
          }
        }}
      >
        <Field id="merge-source" label="User id to merge into this one">
          <input id="merge-source" value={source} onChange={(e) => setSource(e.currentTarget.value)} required />
        </Field>
        <button type="submit">Merge</button>
      </form>
      <Notice text={notice} />
      <ErrorNote error={error} />
    </article>
  );
}
