// Server benchmark (a program, not a test): prints numbers, asserts nothing.
//  1. Decode throughput: one stream alone vs STREAMS (4) at once, each
//     generating N_GEN tokens (ignore_eos). Aggregate tok/s = all tokens
//     after each stream's first / (last token time - earliest first token).
//  2. Time to first token of a chat with a ~HISTORY (1000) token history,
//     cold (a fresh history, nothing cached) vs the next turn of the same
//     conversation (the slot holds the history; only the new turn is
//     prefilled). TTFT = request sent -> first chunk with text.
// Env: INFERNO_URL, INFERNO_KEY, INFERNO_MODEL, N_GEN (64), STREAMS (4),
//      HISTORY (1000), REPEAT (3).
import { MODEL, client } from './lib.mjs';

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
