// Hostile-connection soak on loopback (issue 20): for SOAK_S seconds, IDLE
// sockets that connect and send nothing, SLOW slowloris sockets that send a
// request's headers one byte a second (both reconnect whenever the server
// drops them, as an attacker would), and CLIENTS streaming clients. Every
// PROBE_MS a prober sends GET /health and a small completion; each must be
// answered within LIMIT_MS. Bounded in sockets and time; loopback only.
//
// Env: INFERNO_URL, INFERNO_KEY, INFERNO_MODEL (lib.mjs), SOAK_S (60), IDLE (300),
//      SLOW (50), CLIENTS (16), PROBE_MS (500), LIMIT_MS (2000).
import net from 'node:net';
import { BASE, MODEL, client, check, test, report, raw } from './lib.mjs';

const SOAK_S = Number(process.env.SOAK_S ?? 60);
const IDLE = Math.min(Number(process.env.IDLE ?? 300), 1000);
const SLOW = Math.min(Number(process.env.SLOW ?? 50), 1000);
const CLIENTS = Math.min(Number(process.env.CLIENTS ?? 16), 64);
const PROBE_MS = Number(process.env.PROBE_MS ?? 500);
const LIMIT_MS = Number(process.env.LIMIT_MS ?? 2000);

const url = new URL(BASE);
if (url.hostname !== '127.0.0.1' && url.hostname !== 'localhost') {
  console.error(`soak: refusing to run against ${url.hostname} (loopback only)`);
  process.exit(2);
}
const port = Number(url.port);
const deadline = Date.now() + SOAK_S * 1000;
const stats = { idleOpened: 0, slowOpened: 0, dropped: 0, streams: 0, streamErrors: 0 };
const sockets = new Set();

// One attacker socket; reopens itself when the server closes it.
function attacker(slow) {
  if (Date.now() >= deadline) return;
  const s = net.connect(port, '127.0.0.1');
  sockets.add(s);
  slow ? stats.slowOpened++ : stats.idleOpened++;
  let timer = null;
  s.on('connect', () => {
    if (!slow) return;
    const head = 'GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Pad: ' + 'a'.repeat(10000);
    let i = 0;
    timer = setInterval(() => { if (i < head.length) s.write(head[i++]); }, 1000);
  });
  s.on('error', () => {});
  s.on('close', () => {
    clearInterval(timer);
    sockets.delete(s);
    stats.dropped++;
    if (Date.now() < deadline) setTimeout(() => attacker(slow), 100);
  });
}

async function streamer() {
  while (Date.now() < deadline) {
    try {
      const s = await client.completions.create({
        model: MODEL, prompt: 'The quick brown fox', max_tokens: 12, temperature: 0, stream: true,
      });
      for await (const _ of s) { /* drain */ }
      stats.streams++;
    } catch (e) {
      stats.streamErrors++;
      if (stats.streamErrors <= 3) console.error(`stream: ${e}`);
    }
  }
}

await test(`${SOAK_S} s: ${IDLE} idle + ${SLOW} slowloris sockets, ${CLIENTS} streaming clients`, async () => {
  for (let i = 0; i < IDLE; i++) attacker(false);
  for (let i = 0; i < SLOW; i++) attacker(true);
  const workers = Array.from({ length: CLIENTS }, () => streamer());
  const lat = { health: [], completion: [] };
  let slow = 0, failed = 0;
  await new Promise((r) => setTimeout(r, 1000)); // let the attackers settle in
  while (Date.now() < deadline) {
    for (const [kind, path, body] of [
      ['health', '/health', undefined],
      ['completion', '/v1/completions', JSON.stringify({ model: MODEL, prompt: 'hi', max_tokens: 2 })],
    ]) {
      const t0 = Date.now();
      let ok = false;
      try {
        const r = await Promise.race([
          raw(path, body ? { method: 'POST', body } : {}),
          new Promise((_, rej) => setTimeout(() => rej(new Error('timeout')), 10_000)),
        ]);
        ok = r.status === 200;
      } catch { /* refused, reset or timed out */ }
      const ms = Date.now() - t0;
      lat[kind].push(ms);
      if (!ok) failed++;
      else if (ms > LIMIT_MS) slow++;
    }
    await new Promise((r) => setTimeout(r, PROBE_MS));
  }
  await Promise.all(workers);
  for (const s of sockets) s.destroy();
  const pct = (a, q) => a.length ? [...a].sort((x, y) => x - y)[Math.min(a.length - 1, Math.floor(q * a.length))] : 0;
  console.error(`  soak: ${lat.health.length} probes; /health p50 ${pct(lat.health, 0.5)} ms, max `
    + `${Math.max(0, ...lat.health)} ms; completion p50 ${pct(lat.completion, 0.5)} ms, max `
    + `${Math.max(0, ...lat.completion)} ms; attacker sockets opened ${stats.idleOpened} idle, `
    + `${stats.slowOpened} slow, ${stats.dropped} dropped by the server; ${stats.streams} streams, `
    + `${stats.streamErrors} stream errors`);
  check(lat.health.length > 0, 'probes ran');
  check(failed === 0, 'every probe answered 200', `${failed} failed`);
  check(slow === 0, `every probe answered within ${LIMIT_MS} ms`, `${slow} slower`);
  check(stats.streamErrors === 0, 'streaming clients saw no errors', `${stats.streamErrors}`);
  check(stats.streams > 0, 'streaming clients completed requests');
  if (SOAK_S > 12) check(stats.dropped > 0, 'the header deadline dropped idle and slow sockets');
});

process.exit(report('soak'));
