import { execFile } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/**
 * A throwaway CA and a server certificate it signed, for 127.0.0.1 and localhost, made by
 * `openssl` in `dir`: `ca.pem`, `server.pem`, `server.key`. Returns the CA's PEM, what a
 * client must be told to trust (DESTINATION_CA_FILE) since no bundle knows it.
 */
export async function makeCertificates(dir: string): Promise<string> {
  const p = (name: string) => join(dir, name);
  const ssl = (...args: string[]) => run('openssl', args, { cwd: dir, timeout: 30_000 });
  await ssl(
    'req',
    '-x509',
    '-newkey',
    'rsa:2048',
    '-nodes',
    '-days',
    '2',
    '-subj',
    '/CN=gwtest CA',
    '-keyout',
    p('ca.key'),
    '-out',
    p('ca.pem'),
  );
  await ssl('req', '-newkey', 'rsa:2048', '-nodes', '-subj', '/CN=localhost', '-keyout', p('server.key'), '-out', p('server.csr'));
  writeFileSync(p('server.ext'), 'subjectAltName = IP:127.0.0.1, DNS:localhost\nextendedKeyUsage = serverAuth\n');
  await ssl(
    ...['x509', '-req', '-in', p('server.csr'), '-CA', p('ca.pem'), '-CAkey', p('ca.key'), '-CAcreateserial'],
    ...['-days', '2', '-extfile', p('server.ext'), '-out', p('server.pem')],
  );
  return readFileSync(p('ca.pem'), 'utf8');
}
