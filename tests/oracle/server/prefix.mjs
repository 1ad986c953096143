// The paged KV cache and its radix prefix cache, through the server:
//  1. greedy outputs equal between a --kv paged server (INFERNO_URL) and a
//     --kv basic server (INFERNO_BASIC_URL), for prompts crossing block
//     boundaries, cold and served from the prefix cache (full hit, hit inside
//     an edge, diverging mid-block: copy-on-write);
//  2. a bounded load of requests sharing a SHARED_TOKENS (1000) token system
//     prompt: every request completes, the prefix is reused, and at the end
//     no block reference is unaccounted for (inferno:kv_refcount_errors 0).
import OpenAI from 'openai';
import {
  BASE, KEY, MODEL, client, check, checkEq, test, report, metrics, waitFor,
} from './lib.mjs';

const BASIC = process.env.INFERNO_BASIC_URL;
const SHARED_TOKENS = Number(process.env.SHARED_TOKENS ?? 1000);
const CLIENTS = Number(process.env.PREFIX_CLIENTS ?? 8);
const basic = BASIC ? new OpenAI({ baseURL: `${BASIC}/v1`, apiKey: KEY, maxRetries: 0, timeout: 120_000 }) : null;

const words = 'a river runs past old stone walls and quiet fields toward the grey sea at dusk'.split(' ');
const text = (n, salt) => Array.from({ length: n }, (_, i) => words[(i * 5 + salt) % words.length]).join(' ');

async function greedy(c, prompt, n = 8) {
  const r = await c.completions.create({ model: MODEL, prompt, max_tokens: n, temperature: 0 });
  return { text: r.choices[0].text, cache: r.timings?.cache_n ?? 0 };
}

if (basic) {
  await test('greedy outputs: --kv paged equals --kv basic', async () => {
    const base = text(45, 1); // a few blocks of 16
    const prompts = [
      base,                             // cold
      base,                             // full hit (all but the last token)
      base + ' and then the tide',      // extends a cached prefix
      text(30, 1) + ' but the hills',   // diverges inside a cached edge, mid-block
      text(17, 1),                      // a strict prefix of a cached sequence
      text(70, 3),                      // unrelated, longer
    ];
    let hits = 0;
    for (const p of prompts) {
      const a = await greedy(client, p);
      const b = await greedy(basic, p);
      checkEq(a.text, b.text, `paged vs basic for a ${p.split(' ').length}-word prompt`);
      if (a.cache > 0) hits++;
    }
    check(hits >= 3, 'the paged server reused cached prefixes', hits);
  });
}

await test(`${CLIENTS} clients sharing a ${SHARED_TOKENS}-token system prompt`, async () => {
  const before = await metrics();
  const system = text(SHARED_TOKENS, 7);
  const ask = (q) => client.chat.completions.create({
    model: MODEL, max_tokens: 4, temperature: 0, chat_template_kwargs: { enable_thinking: false },
    messages: [{ role: 'system', content: system }, { role: 'user', content: q }],
  });
  const first = await ask('Question zero?');
  check(first.usage.prompt_tokens >= SHARED_TOKENS * 0.8, 'the system prompt is about SHARED_TOKENS long',
    first.usage.prompt_tokens);
  const results = await Promise.allSettled(Array.from({ length: CLIENTS * 2 }, (_, i) => ask(`Question ${i + 1}?`)));
  const ok = results.filter((r) => r.status === 'fulfilled');
  checkEq(ok.length, results.length, 'every request completed');
  const reused = ok.filter((r) => r.value.timings.cache_n >= first.usage.prompt_tokens - 12).length;
  checkEq(reused, ok.length, 'every request reused the shared prefix');
  const idle = await waitFor(async () => {
    const m = await metrics();
    return m['llamacpp:requests_processing'] === 0 && m;
  }, 5000);
  check(!!idle, 'idle afterwards');
  checkEq(idle['inferno:kv_refcount_errors'], 0, 'no leaked or lost block references');
  check(idle['inferno:prefix_cache_hits_total'] - before['inferno:prefix_cache_hits_total'] >= CLIENTS * 2,
    'prefix cache hits counted');
  check(idle['inferno:kv_blocks_used'] + idle['inferno:kv_blocks_free'] > 0, 'block gauges present');
  const blockBytes = idle['inferno:kv_pool_bytes'] / (idle['inferno:kv_blocks_used'] + idle['inferno:kv_blocks_free']);
  check(blockBytes > 0 && idle['inferno:kv_pool_bytes_used'] === blockBytes * idle['inferno:kv_blocks_used'],
    `pool bytes gauges: ${idle['inferno:kv_pool_bytes_used']} of ${idle['inferno:kv_pool_bytes']}`);
  check(idle['inferno:kv_pool_usage_ratio'] > 0 && idle['inferno:kv_pool_usage_ratio'] <= 1, 'pool usage ratio');
});

await test('pool pressure: eviction keeps serving', async () => {
  // Many distinct long prompts: more than the pool can keep; the oldest
  // prefixes are evicted and every request still completes correctly.
  const m0 = await metrics();
  const perPrompt = 200;
  const n = Math.ceil((m0['inferno:kv_blocks_used'] + m0['inferno:kv_blocks_free']) * 16 / perPrompt) + 2;
  const limit = Math.min(n, 24);
  for (let i = 0; i < limit; i++) {
    const r = await client.completions.create({ model: MODEL, prompt: `${i} ` + text(perPrompt, i), max_tokens: 1, temperature: 0 });
    if (r.choices.length !== 1) { check(false, `prompt ${i} failed`); break; }
  }
  const m1 = await metrics();
  checkEq(m1['inferno:kv_refcount_errors'], 0, 'references balanced after eviction');
  if (limit === n) check(m1['inferno:prefix_cache_evictions_total'] > m0['inferno:prefix_cache_evictions_total'], 'evictions happened');
});

process.exit(report('server prefix cache'));
