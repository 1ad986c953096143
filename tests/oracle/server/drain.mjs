// SIGTERM while streams run (check_lifecycle.sh starts the server and passes
// its pid). MODE=finish: 10 streams over the five APIs (chat, completions,
// Responses, Messages, Ollama's chat; openai@6, @anthropic-ai/sdk, ollama)
// are open, most of them still queued, when the signal comes: a request sent after it is
// refused, and every stream ends as it would have — its normal last event,
// the same text as the same request answered whole before the signal.
// MODE=expire: with --drain-timeout 1, five endless streams (one per API)
// each end with their API's error event and a clean end of stream.
import Anthropic from '@anthropic-ai/sdk';
import { Ollama } from 'ollama';
import { BASE, KEY, MODEL, client, check, checkEq, test, report, sleep } from './lib.mjs';

const PID = Number(process.env.SERVER_PID);
const MODE = process.env.MODE ?? 'finish';
const anthropic = new Anthropic({ baseURL: BASE, apiKey: KEY, maxRetries: 0, timeout: 120_000 });
const ollama = new Ollama({ host: BASE, headers: { Authorization: `Bearer ${KEY}` } });

const say = (i) => `request ${i}: tell me about the number ${i * 7}`;
const MAX = 48;
const APIS = ['chat', 'completions', 'responses', 'messages', 'ollama'];

// One request of an API; whole: the text, streamed: an async text collector
// that also reports how the stream ended.
function params(api, i, stream) {
  const common = { model: MODEL, temperature: 0, stream };
  if (api === 'chat') return { ...common, messages: [{ role: 'user', content: say(i) }], max_tokens: MAX };
  if (api === 'completions') return { ...common, prompt: say(i), max_tokens: MAX };
  if (api === 'responses') return { ...common, input: say(i), max_output_tokens: MAX };
  if (api === 'ollama') {
    return { model: MODEL, stream, messages: [{ role: 'user', content: say(i) }],
      options: { temperature: 0, num_predict: MAX } };
  }
  return { ...common, messages: [{ role: 'user', content: say(i) }], max_tokens: MAX };
}

async function whole(api, i) {
  const p = params(api, i, false);
  if (api === 'chat') return (await client.chat.completions.create(p)).choices[0].message.content;
  if (api === 'completions') return (await client.completions.create(p)).choices[0].text;
  if (api === 'responses') return (await client.responses.create(p)).output_text;
  if (api === 'ollama') return (await ollama.chat(p)).message.content;
  return (await anthropic.messages.create(p)).content.map((b) => b.text ?? '').join('');
}

// Opens the stream (resolves once the response headers are in).
async function open(api, i) {
  const p = params(api, i, true);
  if (api === 'chat') return client.chat.completions.create(p);
  if (api === 'completions') return client.completions.create(p);
  if (api === 'responses') return client.responses.create(p);
  if (api === 'ollama') return ollama.chat(p);
  return anthropic.messages.create(p);
}

// Reads a stream to its end: { text, end } where end names its last event
// ("stop"/"length" for OpenAI's finish_reason, "response.completed",
// "message_stop"), or { error } when the client threw.
async function drainStream(api, s) {
  let text = '', end = null;
  try {
    for await (const ev of s) {
      if (api === 'chat') {
        text += ev.choices?.[0]?.delta?.content ?? '';
        if (ev.choices?.[0]?.finish_reason) end = ev.choices[0].finish_reason;
      } else if (api === 'completions') {
        text += ev.choices?.[0]?.text ?? '';
        if (ev.choices?.[0]?.finish_reason) end = ev.choices[0].finish_reason;
      } else if (api === 'ollama') {
        text += ev.message?.content ?? '';
        if (ev.done) end = ev.done_reason;
      } else if (api === 'responses') {
        if (ev.type === 'response.output_text.delta') text += ev.delta;
        if (ev.type === 'response.completed' || ev.type === 'response.incomplete' || ev.type === 'error') end = ev.type;
      } else {
        if (ev.type === 'content_block_delta') text += ev.delta?.text ?? '';
        if (ev.type === 'message_stop') end = ev.type;
      }
    }
  } catch (e) {
    return { text, end, error: String(e?.message ?? e) };
  }
  return { text, end };
}

// Raw SSE frames of a stream, for the expire mode's exact last frames.
async function rawFrames(path, body) {
  const r = await fetch(`${BASE}${path}`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${KEY}` },
    body: JSON.stringify(body),
  });
  return { status: r.status, text: r.text() };
}

if (MODE === 'finish') {
  await test('10 streams over 5 APIs finish during the drain, as they would have', async () => {
    const jobs = [];
    for (let i = 0; i < 10; i++) jobs.push({ api: APIS[i % APIS.length], i });
    for (const j of jobs) j.want = await whole(j.api, j.i);
    const streams = await Promise.all(jobs.map((j) => open(j.api, j.i)));
    process.kill(PID, 'SIGTERM');
    await sleep(200);
    // nothing new: a 503 (or the port already closed)
    let refused = false, detail = '';
    try {
      await client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'late' }], max_tokens: 2 });
      detail = 'accepted';
    } catch (e) {
      refused = e?.status === 503 || e?.constructor?.name === 'APIConnectionError';
      detail = `${e?.status} ${e?.message}`;
    }
    check(refused, 'a request after SIGTERM is refused', detail);
    const got = await Promise.all(streams.map((s, k) => drainStream(jobs[k].api, s)));
    got.forEach((g, k) => {
      const { api, i, want } = jobs[k];
      check(!g.error, `${api} #${i}: the stream ended without an error`, g.error);
      const endOk = api === 'responses' ? g.end === 'response.incomplete' || g.end === 'response.completed'
        : api === 'messages' ? g.end === 'message_stop' : g.end === 'length' || g.end === 'stop';
      check(endOk, `${api} #${i}: the stream's normal last event`, g.end);
      checkEq(g.text, want, `${api} #${i}: the streamed text equals the whole answer before the signal`);
    });
  });
} else {
  await test('past --drain-timeout, every API ends its stream with its error event', async () => {
    // (Ollama's num_predict -1 runs to the context's end: longer than the drain)
    const bodies = {
      '/v1/chat/completions': { model: MODEL, stream: true, messages: [{ role: 'user', content: 'go on' }], max_tokens: 100000, ignore_eos: true },
      '/v1/completions': { model: MODEL, stream: true, prompt: 'go on', max_tokens: 100000, ignore_eos: true },
      '/v1/responses': { model: MODEL, stream: true, input: 'go on', max_output_tokens: 100000, ignore_eos: true },
      '/v1/messages': { model: MODEL, stream: true, messages: [{ role: 'user', content: 'go on' }], max_tokens: 100000, ignore_eos: true },
      '/api/chat': { model: MODEL, stream: true, messages: [{ role: 'user', content: 'go on' }], options: { num_predict: -1 } },
    };
    const open4 = await Promise.all(Object.entries(bodies).map(([p, b]) => rawFrames(p, b)));
    await sleep(300);
    const t0 = Date.now();
    process.kill(PID, 'SIGTERM');
    const texts = await Promise.all(open4.map((o) => o.text));
    const secs = (Date.now() - t0) / 1000;
    check(secs < 8, 'the streams ended soon after the drain timeout', `${secs} s`);
    const paths = Object.keys(bodies);
    texts.forEach((t, k) => {
      checkEq(open4[k].status, 200, `${paths[k]}: the stream had started`);
      const frames = t.split('\n\n').filter((f) => f.trim() && !f.startsWith(':'));
      const last = frames.at(-1) ?? '', before = frames.at(-2) ?? '';
      if (paths[k] === '/api/chat') {
        const lines = t.split('\n').filter((l) => l.trim());
        let last = null;
        try { last = JSON.parse(lines.at(-1)); } catch { /* not JSON */ }
        check(last && typeof last.error === 'string' && last.error.includes('drain'),
          `${paths[k]}: ends with an {"error"} line naming the drain`, lines.at(-1)?.slice(0, 200));
      } else if (paths[k].endsWith('completions')) {
        checkEq(last, 'data: [DONE]', `${paths[k]}: ends with [DONE]`);
        check(/^data: \{"error":/.test(before) && before.includes('drain'), `${paths[k]}: an error frame naming the drain`, before.slice(0, 200));
      } else {
        check(last.startsWith('event: error\n') && last.includes('drain'), `${paths[k]}: ends with an error event naming the drain`, last.slice(0, 200));
        const data = last.split('\n').find((l) => l.startsWith('data: '));
        let ok = false;
        try { JSON.parse(data.slice(6)); ok = true; } catch { /* not JSON */ }
        check(ok, `${paths[k]}: the error event is JSON`, data);
      }
    });
  });
}

process.exit(report(`drain ${MODE}`));
