// Reads a lifecycled stream with Debian's node-eventsource (a W3C EventSource client we did
// not write), printing one JSON line per event received and per connection error, so a test
// can check what a real browser-style client sees, including its automatic reconnect with
// Last-Event-ID.
//
// usage: node eventsource-client.js URL COUNT TIMEOUT_SECONDS
// Exits 0 after COUNT events, 2 when the timeout passes first.
'use strict';
const EventSource = require(process.env.EVENTSOURCE_MODULE || '/usr/share/nodejs/eventsource');

const [url, count, timeoutSeconds] = [process.argv[2], Number(process.argv[3]), Number(process.argv[4] || 60)];
const types = ['record', 'action', 'relaunch', 'created', 'deleted', 'overflow', 'gap'];
const source = new EventSource(url);
let received = 0;

function print(line) {
  process.stdout.write(JSON.stringify(line) + '\n');
}

source.onopen = () => print({ open: true });
source.onerror = (error) => print({ error: error && error.status ? error.status : 'connection' });
for (const type of types) {
  source.addEventListener(type, (event) => {
    print({ type, id: event.lastEventId, data: event.data });
    received += 1;
    if (received >= count) {
      source.close();
      // Exit once stdout has taken every line (a socket is written asynchronously).
      process.stdout.write('', () => process.exit(0));
    }
  });
}
setTimeout(() => {
  print({ timeout: true, received });
  source.close();
  process.stdout.write('', () => process.exit(2));
}, timeoutSeconds * 1000);
