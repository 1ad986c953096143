// Speculative decoding through `inferno serve`: a server with --spec ngram
// and one with a draft model (-md tiny-q8_0, --draft-p-min 0: it drafts
// every step) give, for a greedy chat completion, exactly the content of the
// same request to a server without speculation (INFERNO_URL, the same target
// model); /props shows the speculative section, /metrics counts the drafted
// tokens, the timings carry llama.cpp's draft_n and draft_n_accepted, and a
// request's speculative.n_max 0 (plain decoding) gives the same text again.
// Env: INFERNO_URL (no speculation), INFERNO_NGRAM_URL, INFERNO_DRAFT_URL,
//      INFERNO_KEY, INFERNO_MODEL.
import { KEY, MODEL, check, checkEq, test, report } from './lib.mjs';

const PLAIN = process.env.INFERNO_URL;
const SERVERS = [
  { name: 'ngram', url: process.env.INFERNO_NGRAM_URL, type: 'ngram' },
  { name: 'draft', url: process.env.INFERNO_DRAFT_URL, type: 'draft' },
];

async function at(base, path, body) {
  const r = await fetch(`${base}${path}`, {
    method: body === undefined ? 'GET' : 'POST',
    headers: { Authorization: `Bearer ${KEY}`, ...(body === undefined ? {} : { 'Content-Type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await r.text();
  let json = null;
  try { json = JSON.parse(text); } catch { /* not JSON */ }
  return { status: r.status, text, json };
}

async function metrics(base) {
  const out = {};
  for (const line of (await at(base, '/metrics')).text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const [name, value] = line.split(' ');
    out[name] = Number(value);
  }
  return out;
}

// A prompt whose greedy reply on the tiny random model repeats itself
// (what the n-gram drafter finds).
const chat = (extra = {}) => ({
  model: MODEL, temperature: 0, max_tokens: 48,
  messages: [{ role: 'user', content: 'Count from one to twenty.' }], ...extra,
});
const said = (r) => JSON.stringify([r.json?.choices?.[0]?.message?.content, r.json?.choices?.[0]?.message?.reasoning_content]);

let want;
await test('the plain server: the reference, no draft counts', async () => {
  const r = await at(PLAIN, '/v1/chat/completions', chat());
  checkEq(r.status, 200, 'status');
  want = said(r);
  checkEq(r.json?.usage?.completion_tokens, 48, '48 tokens');
  check(r.json?.timings && !('draft_n' in r.json.timings), 'no draft_n without speculation', JSON.stringify(r.json?.timings));
  const p = await at(PLAIN, '/props');
  checkEq(p.json?.speculative?.type, 'none', '/props speculative.type');
  checkEq(p.json?.speculative?.draft_model, null, '/props speculative.draft_model');
});

for (const s of SERVERS) {
  await test(`--spec ${s.name}: greedy output equals plain decoding`, async () => {
    const before = await metrics(s.url);
    const r = await at(s.url, '/v1/chat/completions', chat());
    checkEq(r.status, 200, 'status');
    checkEq(said(r), want, 'the same content as without speculation');
    const t = r.json?.timings ?? {};
    check(Number.isInteger(t.draft_n) && t.draft_n > 0 && t.draft_n_accepted >= 0 && t.draft_n_accepted <= t.draft_n,
      'timings.draft_n > 0 and draft_n_accepted within it', JSON.stringify(t));
    const after = await metrics(s.url);
    const drafted = after['inferno:spec_draft_tokens_total'] - (before['inferno:spec_draft_tokens_total'] ?? 0);
    check(drafted > 0 && drafted === t.draft_n, '/metrics spec_draft_tokens_total grew by the request\'s draft_n',
      `${drafted} vs ${t.draft_n}`);
    check(after['inferno:spec_steps_total'] > 0, 'spec_steps_total > 0');
    const acc = after['inferno:spec_accepted_tokens_total'];
    check(acc >= 0 && acc <= after['inferno:spec_draft_tokens_total'], 'accepted within drafted');
    const rate = after['inferno:spec_acceptance_rate'];
    check(Math.abs(rate - acc / after['inferno:spec_draft_tokens_total']) < 1e-9, 'acceptance rate = accepted / drafted', rate);
  });

  await test(`--spec ${s.name}: /props speculative`, async () => {
    const p = (await at(s.url, '/props')).json?.speculative;
    checkEq(p?.type, s.type, 'type');
    if (s.type === 'draft') check(typeof p?.draft_model === 'string' && p.draft_model.length > 0, 'draft_model named', JSON.stringify(p));
    else checkEq(p?.draft_model, null, 'draft_model');
    checkEq(p?.n_max, 16, 'n_max (the default)');
    checkEq(p?.n_min, 0, 'n_min');
    checkEq(p?.p_min, s.type === 'draft' ? 0 : 0.75, 'p_min (--draft-p-min)');
  });

  await test(`--spec ${s.name}: a request's speculative.*`, async () => {
    const off = await at(s.url, '/v1/chat/completions', chat({ 'speculative.n_max': 0 }));
    checkEq(off.status, 200, 'speculative.n_max 0 is accepted');
    checkEq(said(off), want, 'and gives the same text');
    checkEq(off.json?.timings?.draft_n, 0, 'with nothing drafted');
    const few = await at(s.url, '/v1/chat/completions', chat({ 'speculative.n_max': 2, 'speculative.p_min': 0.5, stream: true }));
    checkEq(few.status, 200, 'speculative.n_max 2, streamed');
    let content = '', timings = null;
    for (const line of few.text.split('\n')) {
      if (!line.startsWith('data: {')) continue;
      const ch = JSON.parse(line.slice(6));
      content += ch.choices?.[0]?.delta?.content ?? '';
      if (ch.timings) timings = ch.timings;
    }
    checkEq(content, JSON.parse(want)[0], 'the same content, streamed');
    check(timings && timings.draft_n <= 2 * 48, 'the last chunk\'s timings carry draft_n', JSON.stringify(timings));
    const bad = await at(s.url, '/v1/chat/completions', chat({ 'speculative.n_min': 65 }));
    checkEq(bad.status, 400, 'speculative.n_min 65: 400');
    checkEq(bad.json?.error?.param, 'speculative.n_min', 'naming the field');
  });
}

process.exit(report('spec'));
