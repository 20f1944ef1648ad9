// A webhook receiver to try subscriptions with (docs/guide.md, "Webhooks"): it listens on
// RECEIVER_PORT (default 4000), checks each delivery's signature and age, and prints one line
// per delivery. Usage: WEBHOOK_SECRET=<the subscription's secret> node docs/examples/webhook-receiver.mjs
// Node's standard library only, so it runs anywhere Node does.
import { createHmac, timingSafeEqual } from 'node:crypto';
import { createServer } from 'node:http';

const secret = process.env.WEBHOOK_SECRET;
if (!secret) {
  console.error('Set WEBHOOK_SECRET to the secret the subscription was created with.');
  process.exit(1);
}
const port = Number(process.env.RECEIVER_PORT ?? 4000);

/** True when `signatures` (the X-Service-Signature header) holds an HMAC of `<timestamp>.<body>` under the secret. */
function signedBySecret(timestamp, body, signatures) {
  const expected = createHmac('sha256', secret).update(`${timestamp}.`).update(body).digest();
  // During a secret rotation the header carries two signatures, space-separated.
  return signatures.split(' ').some((part) => {
    if (!part.startsWith('sha256=')) return false;
    const given = Buffer.from(part.slice('sha256='.length), 'hex');
    return given.length === expected.length && timingSafeEqual(given, expected);
  });
}

createServer((req, res) => {
  // Anything but a POST is a check that the receiver is up.
  if (req.method !== 'POST') {
    res.writeHead(200, { 'Content-Type': 'text/plain' }).end('webhook receiver\n');
    return;
  }
  const chunks = [];
  req.on('data', (chunk) => chunks.push(chunk));
  req.on('end', () => {
    // Verify the bytes as received: parsing and re-serialising the JSON would change them.
    const body = Buffer.concat(chunks);
    const timestamp = String(req.headers['x-service-timestamp'] ?? '');
    const fresh = /^\d+$/.test(timestamp) && Math.abs(Date.now() / 1000 - Number(timestamp)) <= 300;
    if (!fresh || !signedBySecret(timestamp, body, String(req.headers['x-service-signature'] ?? ''))) {
      console.log('rejected a delivery: bad or stale signature');
      res.writeHead(401).end();
      return;
    }
    const delivery = JSON.parse(body.toString('utf8'));
    console.log(`verified delivery ${delivery.id}: ${delivery.event_type} ${JSON.stringify(delivery.payload)}`);
    // Answer 2xx quickly; do slow work after answering (a delivery not acknowledged within
    // 30 seconds is retried).
    res.writeHead(204).end();
  });
}).listen(port, () => console.log(`webhook receiver listening on http://localhost:${port}/`));
