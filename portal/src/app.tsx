import { type ReactNode, useEffect, useState } from 'react';
import { Link, Redirect, Route, Router, Switch, useLocation } from 'wouter';
import { ApiError, api, errorText, setCsrfToken, whenUnauthorized } from './api.ts';
import { Connections } from './pages/connections.tsx';
import { Explore } from './pages/explore.tsx';
import { Keys } from './pages/keys.tsx';
import { Live } from './pages/live.tsx';
import { Users } from './pages/users.tsx';
import { WebhookDetail } from './pages/webhook-detail.tsx';
import { Webhooks } from './pages/webhooks.tsx';
import { AREAS, canOpen, SessionContext, takeSignInToken, useSession } from './session.tsx';
import { applyTheme } from './theme.ts';
import type { Area, Session } from './types.ts';

type Boot = { kind: 'loading' } | { kind: 'in'; session: Session } | { kind: 'out'; reason: string };

// One exchange per page load, even when React runs the effect twice in development.
let exchange: Promise<Session> | undefined;

/** Signs in (from a sign-in link) or resumes the session cookie, then renders the portal. */
export function App() {
  const [boot, setBoot] = useState<Boot>({ kind: 'loading' });

  useEffect(() => {
    const token = takeSignInToken();
    exchange ??= token ? api<Session>('POST', '/portal/session', { token }) : api<Session>('GET', '/portal/session');
    exchange.then(
      (session) => {
        setCsrfToken(session.csrf_token);
        applyTheme(session.theme);
        setBoot({ kind: 'in', session });
        // From now on a 401 from any request means the session ended (expired, revoked, signed out elsewhere).
        whenUnauthorized(() => setBoot({ kind: 'out', reason: 'Your portal session has ended. Open a new sign-in link to continue.' }));
      },
      (e: unknown) =>
        setBoot({
          kind: 'out',
          reason:
            e instanceof ApiError && e.status === 401
              ? token
                ? 'This sign-in link has expired, was already used, or is not valid. Ask for a new one.'
                : 'You are not signed in. Open a sign-in link to continue.'
              : `The portal could not reach the service: ${errorText(e)}`,
        }),
    );
  }, []);

  if (boot.kind === 'loading') return <p className="boot">Signing in…</p>;
  if (boot.kind === 'out') return <SignedOut reason={boot.reason} />;
  return (
    <SessionContext.Provider value={boot.session}>
      <Router base="/portal">
        <Shell onSignOut={() => setBoot({ kind: 'out', reason: 'You signed out.' })}>
          <Switch>
            <Route path="/live">{gate('events', <Live />)}</Route>
            <Route path="/explore">{gate('events', <Explore />)}</Route>
            <Route path="/webhooks">{gate('webhooks', <Webhooks />)}</Route>
            <Route path="/webhooks/:id">{(p) => gate('webhooks', <WebhookDetail id={p.id} />)}</Route>
            <Route path="/connections">{gate('all', <Connections />)}</Route>
            <Route path="/users">{gate('all', <Users />)}</Route>
            <Route path="/keys">{gate('all', <Keys />)}</Route>
            <Route>
              <Redirect to={canOpen(boot.session.areas, 'events') ? '/live' : '/webhooks'} replace />
            </Route>
          </Switch>
        </Shell>
      </Router>
    </SessionContext.Provider>
  );
}

const gate = (needs: Area, page: ReactNode) => <AreaGate needs={needs}>{page}</AreaGate>;

function AreaGate({ needs, children }: { needs: Area; children: ReactNode }) {
  const { areas } = useSession();
  if (canOpen(areas, needs)) return children;
  return (
    <section aria-labelledby="refused">
      <h1 id="refused">Not available in this session</h1>
      <p role="alert">
        This portal session is limited to {areas.join(', ')}. <Link href="/webhooks">Go to Webhooks</Link>.
      </p>
    </section>
  );
}

function Shell({ children, onSignOut }: { children: ReactNode; onSignOut: () => void }) {
  const session = useSession();
  const [location] = useLocation();
  const areas = AREAS.filter((a) => canOpen(session.areas, a.needs));
  const signOut = async () => {
    await api('DELETE', '/portal/session').catch(() => undefined);
    setCsrfToken(undefined);
    onSignOut();
  };
  return (
    <div className="shell">
      <a className="skip" href="#main">
        Skip to content
      </a>
      <header className="top">
        {session.theme.logo_url ? <img className="logo" src={session.theme.logo_url} alt="" /> : null}
        <span className="app-name">{session.application_name}</span>
        <span className="spacer" />
        {session.return_url ? (
          <a className="button ghost" href={session.return_url}>
            Back to {hostOf(session.return_url)}
          </a>
        ) : null}
        <button type="button" className="ghost" onClick={signOut}>
          Sign out
        </button>
      </header>
      <nav className="nav" aria-label="Portal areas">
        {areas.map((a) => (
          <Link key={a.path} href={a.path} aria-current={location.startsWith(a.path) ? 'page' : undefined}>
            {a.label}
          </Link>
        ))}
      </nav>
      <main id="main" className="main">
        {children}
      </main>
    </div>
  );
}

function SignedOut({ reason }: { reason: string }) {
  return (
    <main className="signed-out">
      <h1>Developer portal</h1>
      <p role="alert">{reason}</p>
    </main>
  );
}

function hostOf(url: string): string {
  try {
    return new URL(url).host;
  } catch {
    return 'your app';
  }
}
