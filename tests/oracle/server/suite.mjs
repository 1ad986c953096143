// The server driven by the real OpenAI client (openai@6): chat and
// completions, streaming and not, include_usage, stop strings across token
// boundaries, logprobs, seeds, errors, abort mid-stream, /metrics.
// Env: INFERNO_URL, INFERNO_KEY, INFERNO_MODEL (the --alias), INFERNO_CTX.
import OpenAI from 'openai';
import {
  BASE, KEY, MODEL, client, check, checkEq, test, report, raw, metrics, waitFor,
  collectChat, collectCompletion,
} from './lib.mjs';

const CTX = Number(process.env.INFERNO_CTX ?? 512);
const chatMsgs = [{ role: 'user', content: 'Write a short poem about the sea.' }];
const noThink = { chat_template_kwargs: { enable_thinking: false } };

await test('health and models', async () => {
  const h = await raw('/health', { key: null });
  checkEq(h.status, 200, '/health status');
  checkEq(h.json?.status, 'ok', '/health body');
  const models = await client.models.list();
  const ids = [];
  for await (const m of models) ids.push(m.id);
  checkEq(ids[0], MODEL, 'model id is the alias');
});

let wholeChat;
await test('chat, whole', async () => {
  const r = await client.chat.completions.create({
    model: MODEL, messages: chatMsgs, max_tokens: 12, temperature: 0, ...noThink,
  });
  wholeChat = r;
  check(r.id.startsWith('chatcmpl-'), 'chat id');
  checkEq(r.object, 'chat.completion', 'object');
  const c = r.choices[0];
  checkEq(c.message.role, 'assistant', 'role');
  check(typeof c.message.content === 'string', 'content is a string');
  check(['stop', 'length'].includes(c.finish_reason), 'finish_reason', c.finish_reason);
  check(r.usage.prompt_tokens > 0 && r.usage.completion_tokens > 0, 'usage counts');
  checkEq(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens, 'total_tokens');
  if (c.finish_reason === 'length') checkEq(r.usage.completion_tokens, 12, 'length at max_tokens');
  check(typeof r.timings?.predicted_n === 'number', 'llama.cpp timings');
});

await test('chat, streamed with include_usage = whole', async () => {
  const s = await client.chat.completions.create({
    model: MODEL, messages: chatMsgs, max_tokens: 12, temperature: 0, stream: true,
    stream_options: { include_usage: true }, ...noThink,
  });
  const r = await collectChat(s);
  checkEq(r.chunks[0]?.choices?.[0]?.delta?.role, 'assistant', 'first chunk has the role');
  checkEq(r.chunks[0]?.object, 'chat.completion.chunk', 'chunk object');
  const w = wholeChat.choices[0].message;
  checkEq(r.content, w.content ?? '', 'streamed content equals the whole response');
  checkEq(r.reasoning, w.reasoning_content ?? '', 'streamed reasoning equals the whole response');
  checkEq(r.finish, wholeChat.choices[0].finish_reason, 'finish_reason');
  const last = r.chunks[r.chunks.length - 1];
  check(Array.isArray(last.choices) && last.choices.length === 0, 'usage chunk has choices: []');
  // the same counts; the repeat reuses the first request's prompt from the cache
  const counts = (u) => JSON.stringify([u?.prompt_tokens, u?.completion_tokens, u?.total_tokens]);
  checkEq(counts(r.usage), counts(wholeChat.usage), 'usage equals the whole response');
  checkEq(wholeChat.usage?.prompt_tokens_details?.cached_tokens, 0, 'a cold prompt: cached_tokens 0');
  checkEq(r.usage?.prompt_tokens_details?.cached_tokens, wholeChat.usage.prompt_tokens - 2,
          'the repeat reuses all but the last two prompt tokens: cached_tokens');
  const fin = r.chunks[r.chunks.length - 2];
  check(fin.choices[0].finish_reason !== null, 'the chunk before usage carries finish_reason');
  // Every delta is whole UTF-8: the client decoded them, so a broken character
  // would show as U+FFFD where the whole response has none.
  check(!r.content.includes('\uFFFD') || (w.content ?? '').includes('\uFFFD'), 'no broken characters');
});

await test('chat, streamed without include_usage has no usage chunk', async () => {
  const s = await client.chat.completions.create({
    model: MODEL, messages: chatMsgs, max_tokens: 4, temperature: 0, stream: true, ...noThink,
  });
  const r = await collectChat(s);
  checkEq(r.usage, null, 'no usage');
  check(r.chunks.every((c) => c.choices.length === 1), 'every chunk has one choice');
});

const prompt = 'The capital of France is';
let wholeCompl;
await test('completions, whole and streamed', async () => {
  const r = await client.completions.create({ model: MODEL, prompt, max_tokens: 12, temperature: 0, logprobs: 2 });
  wholeCompl = r;
  checkEq(r.object, 'text_completion', 'object');
  check(r.id.startsWith('cmpl-'), 'id');
  const c = r.choices[0];
  check(typeof c.text === 'string', 'text');
  const s = await client.completions.create({
    model: MODEL, prompt, max_tokens: 12, temperature: 0, stream: true, stream_options: { include_usage: true },
  });
  const st = await collectCompletion(s);
  checkEq(st.text, c.text, 'streamed text equals the whole response');
  checkEq(st.finish, c.finish_reason, 'finish_reason');
  checkEq(st.usage?.completion_tokens, r.usage.completion_tokens, 'usage');
  if (c.finish_reason === 'length') checkEq(r.usage.completion_tokens, 12, 'max_tokens reached');
});

await test('logprobs', async () => {
  const c = wholeCompl.choices[0];
  const lp = c.logprobs;
  check(lp && lp.tokens.length > 0, 'completion logprobs present');
  checkEq(lp.tokens.join(''), c.text, 'tokens concatenate to the text');
  check(lp.token_logprobs.every((x) => x <= 0), 'logprobs <= 0');
  // Greedy: each chosen token is the most likely one.
  let ok = true;
  for (let i = 0; i < lp.tokens.length; i++) {
    const tops = Object.values(lp.top_logprobs[i]);
    if (!(Math.max(...tops) <= lp.token_logprobs[i] + 1e-6)) ok = false;
  }
  check(ok, 'temperature 0 picks the top token');
  const r = await client.chat.completions.create({
    model: MODEL, messages: chatMsgs, max_tokens: 8, temperature: 0, logprobs: true, top_logprobs: 3, ...noThink,
  });
  const content = r.choices[0].logprobs?.content ?? [];
  check(content.length > 0, 'chat logprobs present');
  check(content.every((t) => t.top_logprobs.length === 3), 'three alternatives each');
  check(content.every((t) => t.top_logprobs[0].logprob >= t.top_logprobs[1].logprob
    && t.top_logprobs[1].logprob >= t.top_logprobs[2].logprob), 'alternatives sorted');
  check(content.every((t) => t.token === t.top_logprobs[0].token), 'greedy token is the best alternative');
  check(content.every((t) => Array.isArray(t.bytes)), 'bytes present');
});

await test('stop strings across token boundaries', async () => {
  const lp = wholeCompl.choices[0].logprobs;
  const full = wholeCompl.choices[0].text;
  // A stop string made of the end of one token and the start of the next.
  let tried = 0;
  for (let i = 1; i + 1 < lp.tokens.length && tried < 3; i++) {
    const a = lp.tokens[i], b = lp.tokens[i + 1];
    if (a.length < 1 || b.length < 1 || a.includes('\uFFFD') || b.includes('\uFFFD')) continue;
    const stop = a.slice(-1) + b.slice(0, Math.min(2, b.length));
    const at = full.indexOf(stop);
    const want = full.slice(0, at);
    tried++;
    const r = await client.completions.create({ model: MODEL, prompt, max_tokens: 12, temperature: 0, stop: [stop] });
    checkEq(r.choices[0].text, want, `stop ${JSON.stringify(stop)}: text before it`);
    checkEq(r.choices[0].finish_reason, 'stop', `stop ${JSON.stringify(stop)}: finish_reason`);
    const s = await client.completions.create({
      model: MODEL, prompt, max_tokens: 12, temperature: 0, stop, stream: true,
    });
    const st = await collectCompletion(s);
    // Anything leaked would remain in the concatenation of the deltas.
    checkEq(st.text, want, `stop ${JSON.stringify(stop)}: streamed, nothing leaked`);
  }
  check(tried > 0, 'found a token boundary to stop on');
  // A stop string that never occurs changes nothing.
  const r = await client.completions.create({ model: MODEL, prompt, max_tokens: 12, temperature: 0, stop: ['\u0001never'] });
  checkEq(r.choices[0].text, full, 'absent stop string');
});

await test('seeds are reproducible', async () => {
  const req = { model: MODEL, prompt: 'Once upon a time', max_tokens: 8, temperature: 1.0, seed: 1234 };
  const a = await client.completions.create(req);
  const b = await client.completions.create(req);
  checkEq(a.choices[0].text, b.choices[0].text, 'same seed, same text');
  const s = await client.completions.create({ ...req, stream: true });
  checkEq((await collectCompletion(s)).text, a.choices[0].text, 'same seed streamed, same text');
});

await test('errors', async () => {
  const bad = await raw('/v1/chat/completions', { method: 'POST', body: '{"messages": [' });
  checkEq(bad.status, 400, 'malformed JSON: 400');
  check(typeof bad.json?.error?.message === 'string' && typeof bad.json?.error?.type === 'string',
    'malformed JSON: OpenAI error shape');
  for (const [field, value] of [['max_tokens', 'ten'], ['temperature', 'hot'], ['stop', 5],
    ['messages', 'hi'], ['stream', 'yes'], ['top_logprobs', 2], ['n', 3]]) {
    try {
      await client.chat.completions.create({ model: MODEL, messages: chatMsgs, [field]: value });
      check(false, `wrong type for ${field} accepted`);
    } catch (e) {
      check(e instanceof OpenAI.BadRequestError, `${field}: BadRequestError`, e?.constructor?.name);
      checkEq(e.status, 400, `${field}: status`);
    }
  }
  const long = 'hello '.repeat(CTX + 10);
  try {
    await client.completions.create({ model: MODEL, prompt: long, max_tokens: 1 });
    check(false, 'over-long prompt accepted');
  } catch (e) {
    checkEq(e.status, 400, 'over-long prompt: 400');
    checkEq(e.code, 'context_length_exceeded', 'over-long prompt: code');
  }
  try {
    await client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: long }] });
    check(false, 'over-long chat accepted');
  } catch (e) {
    checkEq(e.code, 'context_length_exceeded', 'over-long chat: code');
  }
  const noKey = await raw('/v1/models', { key: null });
  checkEq(noKey.status, 401, 'missing API key: 401');
  const wrong = new OpenAI({ baseURL: `${BASE}/v1`, apiKey: 'sk-wrong', maxRetries: 0 });
  try {
    await wrong.chat.completions.create({ model: MODEL, messages: chatMsgs, max_tokens: 1 });
    check(false, 'wrong API key accepted');
  } catch (e) {
    check(e instanceof OpenAI.AuthenticationError, 'wrong key: AuthenticationError', e?.constructor?.name);
  }
  checkEq((await raw('/v1/nothing-here')).status, 404, 'unknown path: 404');
});

await test('abort mid-stream frees the slot', async () => {
  const before = await metrics();
  const ac = new AbortController();
  const s = await client.chat.completions.create({
    model: MODEL, messages: chatMsgs, max_tokens: 100000, temperature: 1, stream: true, ...noThink,
  }, { signal: ac.signal });
  let n = 0, finished = false;
  try {
    // The SDK ends the iteration quietly on abort.
    for await (const ch of s) {
      if (ch.choices?.[0]?.finish_reason) finished = true;
      if (++n === 3) ac.abort();
    }
  } catch { /* aborted */ }
  check(!finished, 'the stream was still running when aborted (a larger -c makes it longer)');
  const freed = await waitFor(async () => {
    const m = await metrics();
    return m['llamacpp:requests_processing'] === 0
      && m['inferno:requests_cancelled_total'] === before['inferno:requests_cancelled_total'] + 1 && m;
  }, 5000);
  check(!!freed, 'cancelled and no request processing within 5 s');
  const r = await client.completions.create({ model: MODEL, prompt, max_tokens: 2, temperature: 0 });
  check(r.choices.length === 1, 'the server still answers');
});

await test('/metrics counters move', async () => {
  const a = await metrics();
  check('llamacpp:prompt_tokens_total' in a && 'llamacpp:tokens_predicted_total' in a
    && 'llamacpp:requests_deferred' in a && 'llamacpp:prompt_seconds_total' in a
    && 'llamacpp:tokens_predicted_seconds_total' in a, 'llama.cpp metric names');
  await client.completions.create({ model: MODEL, prompt: 'Counting: one, two,', max_tokens: 5, temperature: 0 });
  const b = await metrics();
  check(b['llamacpp:tokens_predicted_total'] > a['llamacpp:tokens_predicted_total'], 'tokens_predicted_total moved');
  check(b['llamacpp:prompt_tokens_total'] > a['llamacpp:prompt_tokens_total'], 'prompt_tokens_total moved');
  check(b['llamacpp:n_decode_total'] > a['llamacpp:n_decode_total'], 'n_decode_total moved');
});

await test('tokenize / detokenize', async () => {
  const t = await raw('/tokenize', { method: 'POST', body: JSON.stringify({ content: 'Hello, world!' }) });
  checkEq(t.status, 200, 'tokenize status');
  check(Array.isArray(t.json?.tokens) && t.json.tokens.length > 0, 'tokens');
  const d = await raw('/detokenize', { method: 'POST', body: JSON.stringify({ tokens: t.json.tokens }) });
  checkEq(d.json?.content, 'Hello, world!', 'round trip');
});

await test('second turn reuses the cache', async () => {
  const msgs = [{ role: 'user', content: 'Tell me about rivers. '.repeat(8) }];
  const r1 = await client.chat.completions.create({ model: MODEL, messages: msgs, max_tokens: 6, temperature: 0, ...noThink });
  const msgs2 = [...msgs, { role: 'assistant', content: r1.choices[0].message.content }, { role: 'user', content: 'And lakes?' }];
  const r2 = await client.chat.completions.create({ model: MODEL, messages: msgs2, max_tokens: 6, temperature: 0, ...noThink });
  // The template may render the first turn's generation prompt differently
  // once the reply is history (Qwen3 drops the empty think block), so the
  // reusable prefix can end a few tokens before the first prompt's end.
  check(r2.timings.cache_n >= r1.usage.prompt_tokens - 8, 'second turn cache_n covers the first prompt',
    `cache_n ${r2.timings.cache_n}, first prompt ${r1.usage.prompt_tokens}`);
  checkEq(r2.timings.prompt_n, r2.usage.prompt_tokens - r2.timings.cache_n, 'prompt_n + cache_n = prompt');
  check(r2.timings.prompt_n < r2.usage.prompt_tokens, 'second turn prefilled only what is new');
});

process.exit(report('server suite'));
