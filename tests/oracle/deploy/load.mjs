// Multi-turn conversations through HAProxy in front of inferno replicas
// (deploy/replicas.sh), for tests/oracle/check_deploy.sh.
//
// CLIENTS clients each run conversations one after another for DURATION_S:
// a system prompt (one of SYSTEMS shared ones, a few hundred tokens), then
// several user turns, each request carrying the whole conversation so far
// with the assistant's replies appended (greedy, MAX_TOKENS). Even clients
// stream, odd ones do not; every fourth client names its conversation with
// the session header (X-Inferno-Session) instead of relying on the body.
// The conversations depend only on (client, conversation, turn), so two runs
// (hash and round-robin routing) send the same ones.
//
// Faults: at KILL_AT seconds the replica with the most requests open is
// SIGKILLed, at DRAIN_AT seconds another one gets SIGTERM (it drains). A
// failed request is attributed to the kill only if it was open at the kill,
// failed after it, and its response headers (X-Inferno-Replica, set by
// HAProxy) named the killed replica; any other failure is a test failure.
// A request that had not received headers at the kill is retried by HAProxy
// (empty-response) and must succeed.
//
// Hit rate = sum(usage.prompt_tokens_details.cached_tokens) /
// sum(usage.prompt_tokens) over the completed requests, overall and over the
// requests that ended before the kill (or WINDOW_S): every replica up.
//
// With ROUTING_CHECKS=1 it first checks the routing itself (hash mode): a
// conversation's turns reach one replica, in every request shape; the
// session header wins over the body.
//
// Env: FRONT (HAProxy's URL), STATE (deploy/replicas.sh's state file),
// DURATION_S (60), CLIENTS (16), SYSTEMS (4), TURNS (8), MAX_TOKENS (8),
// KILL_AT, DRAIN_AT (seconds; unset: no fault), ROUTING_CHECKS, LABEL, OUT
// (a JSON summary is written there). Prints "LABEL: N passed, N failed".
import { readFileSync, writeFileSync } from 'node:fs';

const FRONT = process.env.FRONT;
const STATE = process.env.STATE;
const DURATION_S = Number(process.env.DURATION_S ?? 60);
const CLIENTS = Number(process.env.CLIENTS ?? 16);
const SYSTEMS = Number(process.env.SYSTEMS ?? 4);
const TURNS = Number(process.env.TURNS ?? 8);
const MAX_TOKENS = Number(process.env.MAX_TOKENS ?? 8);
const KILL_AT = process.env.KILL_AT ? Number(process.env.KILL_AT) : null;
// The window compared between runs: requests that ended before the kill, or
// before WINDOW_S seconds in a run without one (all replicas up).
const WINDOW_S = process.env.WINDOW_S ? Number(process.env.WINDOW_S) : null;
const DRAIN_AT = process.env.DRAIN_AT ? Number(process.env.DRAIN_AT) : null;
const LABEL = process.env.LABEL ?? 'deploy load';
const OUT = process.env.OUT;
const SESSION_HEADER = 'X-Inferno-Session';

let passed = 0, failed = 0;
function check(cond, what, detail) {
  if (cond) passed++;
  else {
    failed++;
    console.error(`FAILED: ${what}${detail !== undefined ? ': ' + detail : ''}`);
  }
  return cond;
}

// "r1 PID PORT" lines, then "front URL", "stats URL".
const replicas = {};
let STATS = null;
for (const line of readFileSync(STATE, 'utf8').split('\n')) {
  const f = line.trim().split(/\s+/);
  if (f.length === 3) replicas[f[0]] = { pid: Number(f[1]), port: Number(f[2]) };
  else if (f[0] === 'stats') STATS = f[1];
}

// --- deterministic text --------------------------------------------------
const words = ('the a river stone field city market winter summer road light lamp paper letter garden '
  + 'engine signal harbour bridge window forest valley number table story question answer careful '
  + 'quickly slowly always never often between under over through before after during keeps holds '
  + 'brings finds reads writes builds counts measures compares remembers explains').split(' ');
function text(n, seed) { // n words from a small LCG
  let x = (seed * 2654435761) >>> 0;
  const out = [];
  for (let i = 0; i < n; i++) {
    x = (Math.imul(x, 1103515245) + 12345) >>> 0;
    out.push(words[(x >>> 8) % words.length]);
  }
  return out.join(' ');
}
const systems = Array.from({ length: SYSTEMS }, (_, s) =>
  `You are assistant number ${s} of the deployment test. Follow these house rules. ${text(160, 1000 + s)}.`);
// A user turn is a question about a pasted passage (~75 tokens): what a
// conversation adds beyond the shared system prompt.
const userTurn = (c, n, t) => `Client ${c}, conversation ${n}, turn ${t}. Read this passage: `
  + `${text(45, c * 7919 + n * 104729 + t)}. What does it say?`;

// --- one request -----------------------------------------------------------
// Returns { ok, status, replica, usage, content, error, headersAt }.
async function chat(messages, { stream, session, rec }) {
  const headers = { 'Content-Type': 'application/json' };
  if (session) headers[SESSION_HEADER] = session;
  const body = {
    model: 'tiny', messages, max_tokens: MAX_TOKENS, temperature: 0,
    chat_template_kwargs: { enable_thinking: false },
  };
  if (stream) Object.assign(body, { stream: true, stream_options: { include_usage: true } });
  let r;
  try {
    r = await fetch(`${FRONT}/v1/chat/completions`, { method: 'POST', headers, body: JSON.stringify(body) });
  } catch (e) {
    return { ok: false, status: 0, error: `fetch: ${e.cause?.code ?? e.message}` };
  }
  rec.replica = r.headers.get('x-inferno-replica');
  rec.headersAt = Date.now();
  try {
    if (!stream) {
      const t = await r.text();
      let j = null;
      try { j = JSON.parse(t); } catch { /* not JSON */ }
      if (r.status !== 200 || !j?.choices) return { ok: false, status: r.status, error: t.slice(0, 200) };
      return { ok: true, status: 200, usage: j.usage, content: j.choices[0].message.content ?? '' };
    }
    if (r.status !== 200) return { ok: false, status: r.status, error: (await r.text()).slice(0, 200) };
    let content = '', usage = null, finish = null, done = false, buf = '';
    const dec = new TextDecoder();
    for await (const chunk of r.body) {
      buf += dec.decode(chunk, { stream: true });
      let i;
      while ((i = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, i).trim();
        buf = buf.slice(i + 1);
        if (!line.startsWith('data:')) continue;
        const d = line.slice(5).trim();
        if (d === '[DONE]') { done = true; continue; }
        const j = JSON.parse(d);
        if (j.error) return { ok: false, status: 200, error: `stream error: ${JSON.stringify(j.error)}` };
        if (j.usage) usage = j.usage;
        const ch = j.choices?.[0];
        if (ch?.delta?.content) content += ch.delta.content;
        if (ch?.finish_reason) finish = ch.finish_reason;
      }
    }
    if (!done || !finish || !usage) return { ok: false, status: 200, error: `incomplete stream (done ${done}, finish ${finish})` };
    return { ok: true, status: 200, usage, content };
  } catch (e) {
    return { ok: false, status: r.status, error: `body: ${e.cause?.code ?? e.message}` };
  }
}

// --- routing checks (hash mode) -----------------------------------------------
// The replica that answered (a status other than 200: "status N").
async function replicaOf(path, body, session) {
  const headers = { 'Content-Type': 'application/json' };
  if (session) headers[SESSION_HEADER] = session;
  const r = await fetch(`${FRONT}${path}`, { method: 'POST', headers, body: JSON.stringify(body) });
  await r.text();
  return r.status === 200 ? r.headers.get('x-inferno-replica') : `status ${r.status}`;
}
const one = (set, what) => check(set.size === 1 && !String([...set][0]).startsWith('status') && [...set][0] !== null,
  what, [...set].join(','));
async function routingChecks() {
  const k = { model: 'tiny', max_tokens: 1, temperature: 0 };
  const ollamaName = (await (await fetch(`${FRONT}/api/tags`)).json()).models[0].name;
  const sys = 'Routing check system prompt: be brief.';
  const spread = new Set();
  for (let c = 0; c < 8; c++) {
    const u1 = `routing conversation ${c}, first question`;
    const seen = new Set();
    // OpenAI chat with a system message: turn 1, turn 2, turn 3, and the
    // same with content parts; without a system message.
    const m1 = [{ role: 'system', content: sys }, { role: 'user', content: u1 }];
    const m2 = [...m1, { role: 'assistant', content: 'reply one' }, { role: 'user', content: 'second question' }];
    const m3 = [...m2, { role: 'assistant', content: 'reply two' }, { role: 'user', content: 'third question' }];
    for (const m of [m1, m2, m3]) seen.add(await replicaOf('/v1/chat/completions', { ...k, messages: m }));
    const parts = m2.map((x) => ({ role: x.role, content: [{ type: 'text', text: x.content }] }));
    seen.add(await replicaOf('/v1/chat/completions', { ...k, messages: parts }));
    spread.add([...seen][0]);
    check(seen.size === 1 && !String([...seen][0]).startsWith('status'),
      `chat conversation ${c}: every turn on one replica`, [...seen].join(','));
    const noSys = new Set();
    noSys.add(await replicaOf('/v1/chat/completions', { ...k, messages: m1.slice(1) }));
    noSys.add(await replicaOf('/v1/chat/completions', { ...k, messages: m2.slice(1) }));
    check(noSys.size === 1, `chat conversation ${c} without a system prompt: one replica`, [...noSys].join(','));
    // Anthropic Messages: system as a string and as text blocks.
    const a = new Set();
    a.add(await replicaOf('/v1/messages', { ...k, system: sys, messages: m1.slice(1) }));
    a.add(await replicaOf('/v1/messages', { ...k, system: [{ type: 'text', text: sys }], messages: m2.slice(1) }));
    check(a.size === 1 && !String([...a][0]).startsWith('status'),
      `messages conversation ${c}: every turn on one replica`, [...a].join(','));
    // Responses: instructions + input as a string, then as items.
    const rs = new Set();
    rs.add(await replicaOf('/v1/responses', { model: 'tiny', max_output_tokens: 16, instructions: sys, input: u1 }));
    rs.add(await replicaOf('/v1/responses', {
      model: 'tiny', max_output_tokens: 16, instructions: sys,
      input: [{ role: 'user', content: u1 }, { role: 'assistant', content: 'reply one' }, { role: 'user', content: 'second' }],
    }));
    one(rs, `responses conversation ${c}: every turn on one replica`);
    // Completions: a raw prompt growing at its end, keyed by its first 256 bytes.
    const p1 = `${u1}. ${text(60, 500 + c)}`;
    const cs = new Set();
    for (const p of [p1, `${p1} reply one. second question`]) cs.add(await replicaOf('/v1/completions', { ...k, prompt: p }));
    one(cs, `completions conversation ${c} (a prompt past 256 bytes, growing): one replica`);
    // Ollama /api/chat: the chat rule (its model name as /api/tags lists it).
    const os = new Set();
    for (const m of [m1, m2]) {
      os.add(await replicaOf('/api/chat', { model: ollamaName, messages: m, stream: false, options: { num_predict: 1 } }));
    }
    one(os, `ollama chat conversation ${c}: every turn on one replica`);
  }
  check(spread.size >= 2, 'conversations spread over replicas', [...spread].join(','));
  // The session header wins over the body.
  const same = { ...k, messages: [{ role: 'user', content: 'one body for every session' }] };
  const bySession = new Set();
  for (let s = 0; s < 8; s++) bySession.add(await replicaOf('/v1/chat/completions', same, `session-${s}`));
  check(bySession.size >= 2, 'one body, eight sessions: more than one replica', [...bySession].join(','));
  const oneSession = new Set();
  for (let b = 0; b < 8; b++) {
    oneSession.add(await replicaOf('/v1/chat/completions',
      { ...k, messages: [{ role: 'user', content: `body ${b} in one session` }] }, 'session-fixed'));
  }
  check(oneSession.size === 1, 'eight bodies, one session: one replica', [...oneSession].join(','));
}

// --- the load -------------------------------------------------------------------
const records = []; // every request
const open = new Set();
const events = {}; // name -> { at, replica, openOnIt }
let t0 = 0, deadline = 0; // set when the load starts

async function client(c) {
  const stream = c % 2 === 0;
  for (let n = 0; Date.now() < deadline; n++) {
    const turns = TURNS - 1 + ((c + n) % 3); // TURNS-1 .. TURNS+1
    const session = c % 4 === 3 ? `client-${c}-conv-${n}` : null;
    const messages = [{ role: 'system', content: systems[(c + n) % SYSTEMS] }];
    for (let t = 0; t < turns && Date.now() < deadline; t++) {
      messages.push({ role: 'user', content: userTurn(c, n, t) });
      const rec = { c, n, t, stream, start: Date.now(), end: null, replica: null, headersAt: null };
      records.push(rec);
      open.add(rec);
      const r = await chat(messages, { stream, session, rec });
      rec.end = Date.now();
      open.delete(rec);
      Object.assign(rec, { ok: r.ok, status: r.status, error: r.error });
      if (!r.ok) break; // a new conversation
      rec.prompt = r.usage.prompt_tokens;
      rec.cached = r.usage.prompt_tokens_details?.cached_tokens ?? 0;
      messages.push({ role: 'assistant', content: r.content });
    }
  }
}

function openOn(name) { return [...open].filter((r) => r.replica === name).length; }
function fault(name, signal, exclude) {
  // The replica with most requests open on it (known from their headers).
  const alive = Object.keys(replicas).filter((r) => !exclude.includes(r));
  alive.sort((a, b) => openOn(b) - openOn(a) || a.localeCompare(b));
  const target = alive[0];
  const at = Date.now();
  const openRecs = [...open].filter((r) => r.replica === target);
  process.kill(replicas[target].pid, signal);
  events[name] = { at, replica: target, openOnIt: openRecs, openTotal: open.size };
  console.error(`  ${signal} ${target} (pid ${replicas[target].pid}) at ${((at - t0) / 1000).toFixed(1)} s: `
    + `${openRecs.length} requests open on it (by their headers), ${open.size} open in all`);
  return target;
}

async function statsCsv() {
  const r = await fetch(`${STATS}/stats;csv`);
  const lines = (await r.text()).split('\n');
  const head = lines[0].replace(/^# /, '').split(',');
  const out = {};
  for (const l of lines.slice(1)) {
    const f = l.split(',');
    if (f[0] === 'inferno' && f[1] && f[1] !== 'BACKEND') out[f[1]] = f[head.indexOf('status')];
  }
  return out;
}

function hitRate(recs) {
  const ok = recs.filter((r) => r.ok);
  const p = ok.reduce((s, r) => s + r.prompt, 0), c = ok.reduce((s, r) => s + r.cached, 0);
  return { requests: ok.length, prompt_tokens: p, cached_tokens: c, hit_rate: p ? c / p : 0 };
}

if (process.env.ROUTING_CHECKS === '1') {
  try { await routingChecks(); } catch (e) { check(false, 'routing checks', e?.stack ?? e); }
  console.error(`  routing checks: ${passed} passed, ${failed} failed`);
}

t0 = Date.now();
deadline = t0 + DURATION_S * 1000;
const timers = [];
let killed = null, drained = null;
if (KILL_AT !== null) timers.push(setTimeout(() => { killed = fault('kill', 'SIGKILL', []); }, KILL_AT * 1000));
if (DRAIN_AT !== null) {
  timers.push(setTimeout(() => { drained = fault('drain', 'SIGTERM', killed ? [killed] : []); }, DRAIN_AT * 1000));
}
let downSeen = null;
if (DRAIN_AT !== null) { // HAProxy must take the drained replica out
  timers.push(setTimeout(async function poll() {
    try {
      const s = await statsCsv();
      if (drained && /^DOWN/.test(s[drained] ?? '')) { downSeen = Date.now(); return; }
    } catch { /* retry */ }
    if (Date.now() < deadline + 10000) timers.push(setTimeout(poll, 100));
  }, DRAIN_AT * 1000 + 50));
}
await Promise.all(Array.from({ length: CLIENTS }, (_, c) => client(c)));
const secs = (Date.now() - t0) / 1000;
for (const t of timers) clearTimeout(t);

// --- verdicts -----------------------------------------------------------------
const failures = records.filter((r) => r.ok === false);
const kill = events.kill;
// Only the killed replica can have sent a response naming it, and a dead
// process sends nothing: a request that names it, was open at the kill and
// broke off mid-response was in flight on it. So was one HAProxy answered
// 502 for, naming it (it died with the response's headers half sent, which
// cannot be replayed); any other error answer is not the kill's.
const cut = (r) => /^(body:|incomplete stream)/.test(r.error ?? '') || r.status === 502;
const attributed = failures.filter((r) => kill && r.start < kill.at && r.end >= kill.at
  && r.replica === kill.replica && cut(r));
const other = failures.filter((r) => !attributed.includes(r));
for (const r of other.slice(0, 5)) {
  console.error(`  failure: client ${r.c} conv ${r.n} turn ${r.t} ${r.stream ? 'stream' : 'whole'} `
    + `replica ${r.replica} status ${r.status} at ${((r.end - t0) / 1000).toFixed(1)} s: ${r.error}`);
}
const byReplica = {};
for (const r of records) if (r.ok) byReplica[r.replica] = (byReplica[r.replica] ?? 0) + 1;
const whole = hitRate(records);
const windowEnd = kill ? kill.at : WINDOW_S !== null ? t0 + WINDOW_S * 1000 : Infinity;
const inWindow = records.filter((r) => r.end !== null && r.end < windowEnd);
const byReplicaUp = {};
for (const r of inWindow) if (r.ok) byReplicaUp[r.replica] = (byReplicaUp[r.replica] ?? 0) + 1;
const before = hitRate(inWindow);
const byTurn = []; // hit rate per turn index, in the window
for (let t = 0; t <= TURNS + 1; t++) {
  const h = hitRate(inWindow.filter((r) => r.t === t));
  if (h.requests) byTurn.push(`${t + 1}:${(h.hit_rate * 100).toFixed(0)}%/${h.requests}`);
}
const summary = {
  label: LABEL, seconds: secs, clients: CLIENTS, requests: records.length,
  completed: records.filter((r) => r.ok).length, failed: failures.length,
  failed_attributed_to_kill: attributed.length, failed_other: other.length,
  by_replica: byReplica, by_replica_all_up: byReplicaUp, hit_rate: whole, hit_rate_all_replicas_up: before,
  hit_rate_by_turn: byTurn.join(' '),
};
if (kill) {
  summary.kill = { replica: kill.replica, at_s: (kill.at - t0) / 1000, open_on_it: kill.openOnIt.length, open_total: kill.openTotal };
  summary.kill.open_on_it_completed = kill.openOnIt.filter((r) => r.ok).length;
  summary.kill.failed_502 = attributed.filter((r) => r.status === 502).length;
}
if (events.drain) {
  const d = events.drain;
  summary.drain = { replica: d.replica, at_s: (d.at - t0) / 1000, open_on_it: d.openOnIt.length,
    open_on_it_completed: d.openOnIt.filter((r) => r.ok).length,
    marked_down_after_s: downSeen ? (downSeen - d.at) / 1000 : null };
}
console.error(`  ${LABEL}: ${records.length} requests in ${secs.toFixed(1)} s, ${summary.completed} completed, `
  + `${failures.length} failed (${attributed.length} open on the killed replica at the kill, ${other.length} other); `
  + `per replica ${JSON.stringify(byReplica)} (all up: ${JSON.stringify(byReplicaUp)}); hit rate ${(whole.hit_rate * 100).toFixed(1)}% overall, `
  + `${(before.hit_rate * 100).toFixed(1)}% in the first ${((Math.min(windowEnd, Date.now()) - t0) / 1000).toFixed(1)} s, `
  + `all replicas up (${before.requests} requests; by turn, hit rate/requests: ${byTurn.join(' ')})`);
if (OUT) {
  const winSet = new Set(inWindow);
  summary.records = records.filter((r) => r.ok).map((r) => ({
    c: r.c, n: r.n, t: r.t, prompt: r.prompt, cached: r.cached, window: winSet.has(r),
  }));
  writeFileSync(OUT, JSON.stringify(summary) + '\n');
}

check(summary.completed > CLIENTS * 2, 'conversations made progress', summary.completed);
check(before.requests >= CLIENTS, 'requests completed while all replicas were up', before.requests);
check(before.cached_tokens > 0, 'the prefix cache was used');
check(other.length === 0, 'no failure other than requests open on the killed replica at the kill',
  `${other.length} others`);
check(other.every((r) => r.status < 500), 'no 5xx reached a client (HAProxy retried the drain\'s 503s and the refused connections)',
  other.filter((r) => r.status >= 500).map((r) => r.status).join(','));
if (kill) {
  check(!!killed, 'the kill happened');
  check(records.some((r) => r.ok && r.start > kill.at), 'requests completed after the kill');
}
if (events.drain) {
  const d = events.drain;
  check(d.replica !== kill?.replica, 'the drained replica is another one');
  check(d.openOnIt.every((r) => r.ok), 'requests open on the draining replica completed',
    `${d.openOnIt.filter((r) => !r.ok).length} of ${d.openOnIt.length} failed`);
  check(downSeen !== null, 'HAProxy marked the drained replica DOWN');
  check(records.some((r) => r.ok && r.start > d.at + 3000), 'requests completed after the drain');
  const st = await statsCsv().catch(() => ({}));
  console.error(`  HAProxy server states at the end: ${JSON.stringify(st)}`);
  check(/^DOWN/.test(st[kill?.replica] ?? '') && /^DOWN/.test(st[d.replica] ?? ''),
    'the killed and the drained replicas are DOWN at the end', JSON.stringify(st));
}
console.log(`${LABEL}: ${passed} passed, ${failed} failed`);
process.exit(failed === 0 ? 0 : 1);
