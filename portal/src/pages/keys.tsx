import { useCallback, useEffect, useState } from 'react';
import { api, errorText } from '../api.ts';
import { ErrorNote, SecretOnce, Table, when } from '../components/ui.tsx';
import { useSession } from '../session.tsx';
import type { Answer } from '../types.ts';

type ApiKeys = Answer<'listApiKeys'>['data'];
type PortalSessions = Answer<'listPortalSessions'>['data'];

export function Keys() {
  // A key holds none of the scopes its maker lacks, and the maker here is this session.
  const { scopes: held } = useSession();
  const [keys, setKeys] = useState<ApiKeys>();
  const [sessions, setSessions] = useState<PortalSessions>();
  const [scopes, setScopes] = useState<string[]>(held.includes('events:read') ? ['events:read'] : []);
  const [created, setCreated] = useState<string>();
  const [error, setError] = useState<string>();
  const load = useCallback(
    () =>
      Promise.all([
        api<Answer<'listApiKeys'>>('GET', '/v1/api-keys'),
        api<Answer<'listPortalSessions'>>('GET', '/v1/portal/sessions'),
      ]).then(
        ([k, p]) => {
          setKeys(k.data);
          setSessions(p.data);
        },
        (e) => setError(errorText(e)),
      ),
    [],
  );
  useEffect(() => void load(), [load]);
  const run = async (fn: () => Promise<void>) => {
    setError(undefined);
    try {
      await fn();
      await load();
    } catch (e) {
      setError(errorText(e));
    }
  };

  return (
    <section aria-labelledby="keys-title">
      <h1 id="keys-title">API keys and access</h1>
      <form
        className="card"
        aria-label="New API key"
        onSubmit={(e) => {
          e.preventDefault();
          void run(async () => setCreated((await api<Answer<'createApiKey', 201>>('POST', '/v1/api-keys', { scopes })).api_key));
        }}
      >
        <fieldset>
          <legend>Scopes of the new key</legend>
          {held.map((s) => (
            <label key={s} className="check">
              <input
                type="checkbox"
                checked={scopes.includes(s)}
                onChange={(e) => setScopes(e.currentTarget.checked ? [...scopes, s] : scopes.filter((x) => x !== s))}
              />{' '}
              {s}
            </label>
          ))}
        </fieldset>
        <div className="actions">
          <button type="submit" disabled={scopes.length === 0}>
            Create key
          </button>
        </div>
      </form>
      {created ? <SecretOnce title="New API key" secret={created} /> : null}
      <ErrorNote error={error} />
      {keys ? (
        <Table
          caption="API keys"
          head={
            <>
              <th scope="col">Prefix</th>
              <th scope="col">Scopes</th>
              <th scope="col">Created</th>
              <th scope="col">Last used</th>
              <th scope="col">
                <span className="sr-only">Actions</span>
              </th>
            </>
          }
        >
          {keys.map((k) => (
            <tr key={k.id}>
              <td>
                <code>{k.key_prefix}…</code>
              </td>
              <td>{k.scopes.join(', ')}</td>
              <td>{when(k.created_at)}</td>
              <td>{when(k.last_used_at)}</td>
              <td>
                {k.revoked_at ? (
                  `revoked ${when(k.revoked_at)}`
                ) : (
                  <button
                    type="button"
                    className="small danger"
                    onClick={() =>
                      window.confirm(`Revoke ${k.key_prefix}…? Requests with it fail at once.`) &&
                      void run(() => api('DELETE', `/v1/api-keys/${k.id}`))
                    }
                  >
                    Revoke
                  </button>
                )}
              </td>
            </tr>
          ))}
        </Table>
      ) : null}
      <h2>Portal sessions</h2>
      <p className="muted">Signed-in portal pages and unused sign-in links; ending one signs that page out at once.</p>
      {sessions ? (
        <Table
          caption="Portal sessions"
          head={
            <>
              <th scope="col">Areas</th>
              <th scope="col">Created</th>
              <th scope="col">Signed in</th>
              <th scope="col">Ends</th>
              <th scope="col">
                <span className="sr-only">Actions</span>
              </th>
            </>
          }
        >
          {sessions.map((p) => (
            <tr key={p.id} data-session-id={p.id}>
              <td>{p.areas.join(', ')}</td>
              <td>{when(p.created_at)}</td>
              <td>{p.exchanged_at ? when(p.exchanged_at) : 'link not used yet'}</td>
              <td>{when(p.expires_at)}</td>
              <td>
                <button
                  type="button"
                  className="small danger"
                  onClick={() => window.confirm('End this portal session?') && void run(() => api('DELETE', `/v1/portal/sessions/${p.id}`))}
                >
                  End
                </button>
              </td>
            </tr>
          ))}
        </Table>
      ) : null}
    </section>
  );
}
