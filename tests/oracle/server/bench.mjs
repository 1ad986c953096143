// Server benchmark (a program, not a test): prints numbers, asserts nothing.
//  1. Decode throughput: one stream alone vs STREAMS (4) at once, each
//     generating N_GEN tokens (ignore_eos). Aggregate tok/s = all tokens
//     after each stream's first / (last token time - earliest first token).
//  2. Time to first token of a chat with a ~HISTORY (1000) token history,
//     cold (a fresh history, nothing cached) vs the next turn of the same
//     conversation (the slot holds the history; only the new turn is
//     prefilled). TTFT = request sent -> first chunk with text.
//  3. A new request sharing a HISTORY-token system prompt with an earlier
//     one (the prefix cache) vs cold; and KV memory per concurrent request
//     with STREAMS requests on that shared prompt, from /metrics (paged) or
//     the preallocated slots (basic).
// Env: INFERNO_URL, INFERNO_KEY, INFERNO_MODEL, N_GEN (64), STREAMS (4),
//      HISTORY (1000), REPEAT (3).
import { MODEL, client, metrics } from './lib.mjs';

const N_GEN = Number(process.env.N_GEN ?? 64);
const STREAMS = Number(process.env.STREAMS ?? 4);
const HISTORY = Number(process.env.HISTORY ?? 1000);
const REPEAT = Number(process.env.REPEAT ?? 3);
const median = (a) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)];

async function stream(prompt) {
  const s = await client.completions.create({
    model: MODEL, prompt, max_tokens: N_GEN, temperature: 0, ignore_eos: true, stream: true,
    stream_options: { include_usage: true },
  });
  let first = 0, last = 0, tokens = 0;
  for await (const ch of s) {
    const now = performance.now();
    if (ch.usage) tokens = ch.usage.completion_tokens;
    if (ch.choices?.[0]?.text) { if (!first) first = now; last = now; }
  }
  return { first, last, tokens };
}

async function decode(n) {
  const rs = await Promise.all(Array.from({ length: n }, (_, i) => stream(`Stream ${i}: once upon a time`)));
  const t0 = Math.min(...rs.map((r) => r.first)), t1 = Math.max(...rs.map((r) => r.last));
  const toks = rs.reduce((a, r) => a + r.tokens - 1, 0);
  return toks / ((t1 - t0) / 1000);
}

async function ttft(messages) {
  const t0 = performance.now();
  const s = await client.chat.completions.create({
    model: MODEL, messages, max_tokens: 4, temperature: 0, stream: true, ignore_eos: true,
    chat_template_kwargs: { enable_thinking: false },
  });
  let first = 0, reply = '';
  for await (const ch of s) {
    const d = ch.choices?.[0]?.delta;
    const text = (d?.content ?? '') + (d?.reasoning_content ?? '');
    if ((text || ch.choices?.[0]?.finish_reason) && !first) first = performance.now();
    reply += d?.content ?? '';
  }
  return { ms: first - t0, reply };
}

const words = 'the river runs past old stone walls and quiet fields toward the grey sea'.split(' ');
function history(seed) {
  // About HISTORY tokens of plain words (one token each, roughly), unique per seed.
  const out = [`Conversation ${seed}.`];
  for (let i = 0; i < HISTORY - 40; i++) out.push(words[(i * 7 + seed) % words.length]);
  return out.join(' ');
}

await stream('warm up');

// Memory first, while the pool is empty (later sections fill the prefix cache).
const m0 = await metrics();
const models = await client.models.list();
let meta;
for await (const m of models) meta = m.meta;
if ('inferno:kv_blocks_used' in m0) {
  const system = history(9000 + Date.now() % 100000);
  const pt = (await client.chat.completions.create({ model: MODEL, messages: [{ role: 'system', content: system }, { role: 'user', content: 'warm' }], max_tokens: 1 })).usage.prompt_tokens;
  // Occupy STREAMS slots at once on the shared prompt, sample the pool mid-flight.
  const base = (await metrics())['inferno:kv_blocks_used'];
  let peak = 0;
  const run = Promise.all(Array.from({ length: STREAMS }, (_, i) => client.chat.completions.create({
    model: MODEL, max_tokens: N_GEN, temperature: 0, ignore_eos: true,
    messages: [{ role: 'system', content: system }, { role: 'user', content: `Question ${i}` }],
  })));
  const poll = (async () => {
    for (let i = 0; i < 200; i++) {
      const m = await metrics();
      if (m['llamacpp:requests_processing'] === STREAMS) peak = Math.max(peak, m['inferno:kv_blocks_used']);
      await new Promise((res) => setTimeout(res, 50));
      if (m['llamacpp:requests_processing'] === 0 && i > 5) break;
    }
  })();
  await run;
  await poll;
  const bs = m0['inferno:kv_block_size'];
  const shared = Math.ceil(pt / bs), own = peak - base;
  const perReq = (shared + own) * bs / STREAMS;
  console.log(`memory (paged): ${STREAMS} concurrent requests (${pt}-token shared prompt + ${N_GEN} generated) `
    + `hold the shared ${shared} blocks once plus ${own} blocks of their own: ${perReq.toFixed(0)} positions `
    + `per request; basic: ${meta?.n_ctx} positions preallocated per slot (${pt + N_GEN} used)`);
} else {
  console.log(`memory (basic): ${meta?.n_ctx} positions preallocated per slot, whatever the request length`);
}

const single = [], multi = [];
for (let r = 0; r < REPEAT; r++) {
  single.push(await decode(1));
  multi.push(await decode(STREAMS));
}
const s1 = median(single), sN = median(multi);
console.log(`decode: 1 stream ${s1.toFixed(1)} tok/s; ${STREAMS} streams ${sN.toFixed(1)} tok/s aggregate; `
  + `ratio ${(sN / s1).toFixed(2)}x (median of ${REPEAT}, ${N_GEN} tokens each)`);

const cold = [], warm = [];
for (let r = 0; r < REPEAT; r++) {
  const msgs = [{ role: 'user', content: history(1000 + r + Date.now() % 100000) }];
  const c = await ttft(msgs);
  cold.push(c.ms);
  const next = [...msgs, { role: 'assistant', content: c.reply }, { role: 'user', content: 'And then?' }];
  warm.push((await ttft(next)).ms);
}
const pt = (await client.chat.completions.create({
  model: MODEL, messages: [{ role: 'user', content: history(7) }], max_tokens: 1,
})).usage.prompt_tokens;
const c = median(cold), w = median(warm);
console.log(`ttft: ${pt}-token history: cold ${c.toFixed(0)} ms, second turn ${w.toFixed(0)} ms; `
  + `${(c / w).toFixed(1)}x sooner (median of ${REPEAT})`);

// 3. Shared system prompt, a new request each time.
const sharedCold = [], sharedWarm = [];
for (let r = 0; r < REPEAT; r++) {
  const system = history(5000 + r + Date.now() % 100000);
  const ask = (q) => ttft([{ role: 'system', content: system }, { role: 'user', content: q }]);
  sharedCold.push((await ask('First question?')).ms);
  sharedWarm.push((await ask('A different question?')).ms);
}
const sc = median(sharedCold), sw = median(sharedWarm);
console.log(`shared prefix: ${pt}-token system prompt: cold ${sc.toFixed(0)} ms, new request on the cached `
  + `prefix ${sw.toFixed(0)} ms; ${(sc / sw).toFixed(1)}x sooner (median of ${REPEAT})`);

