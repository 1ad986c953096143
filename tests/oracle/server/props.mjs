// llama.cpp's /props and /apply-template, /v1/models' default_sampling, and
// the model's recommended sampling as the default of a request: run against
// the ordinary server (llama.cpp's defaults) and, with INFERNO_SAMPLING_URL,
// a server on a model whose file recommends temperature 0, top_k 7,
// top_p 0.5, min_p 0.25, repetition penalty 1.5 (tests/oracle/embd_model.py).
// Env: INFERNO_URL, INFERNO_KEY, INFERNO_MODEL, INFERNO_CTX, INFERNO_SAMPLING_URL.
import OpenAI from 'openai';
import { KEY, MODEL, client, check, checkEq, test, report, raw } from './lib.mjs';

const CTX = Number(process.env.INFERNO_CTX ?? 512);
const SURL = process.env.INFERNO_SAMPLING_URL;
const near = (a, b) => Math.abs(a - b) < 1e-6;
const msgs = [{ role: 'user', content: 'Name three colours.' }];

await test('/props', async () => {
  const r = await raw('/props');
  checkEq(r.status, 200, 'status');
  const g = r.json?.default_generation_settings;
  checkEq(g?.n_ctx, CTX, 'n_ctx');
  check(near(g?.params?.temperature, 0.8) && g?.params?.top_k === 40 && near(g?.params?.top_p, 0.95) &&
    near(g?.params?.min_p, 0.05), "llama.cpp's defaults for a model that states none", JSON.stringify(g?.params));
  checkEq(JSON.stringify(g?.sampling_from_model), '[]', 'nothing from the model');
  checkEq(r.json?.total_slots, 4, 'total_slots');
  check(typeof r.json?.model_path === 'string' && r.json.model_path.length > 0, 'model_path');
  check(r.json?.chat_template?.includes('<|im_start|>'), 'chat_template is the model\'s');
  check(typeof r.json?.build_info === 'string', 'build_info');
  const noKey = await raw('/props', { key: null });
  checkEq(noKey.status, 401, '/props needs the key like the other endpoints');
});

await test('/apply-template', async () => {
  const body = { messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Hi there' }] };
  const r = await raw('/apply-template', { method: 'POST', body: JSON.stringify(body) });
  checkEq(r.status, 200, 'status');
  const p = r.json?.prompt ?? '';
  check(p.startsWith('<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n'),
    'the rendered prompt', JSON.stringify(p));
  const off = await raw('/apply-template', { method: 'POST', body: JSON.stringify({ ...body, chat_template_kwargs: { enable_thinking: false } }) });
  check((off.json?.prompt ?? '').endsWith('<think>\n\n</think>\n\n'), 'enable_thinking false renders the empty think block', off.text);
  const tools = [{ type: 'function', function: { name: 'get_weather', description: 'w', parameters: { type: 'object', properties: {} } } }];
  const t = await raw('/apply-template', { method: 'POST', body: JSON.stringify({ ...body, tools }) });
  check((t.json?.prompt ?? '').includes('get_weather'), 'tools are rendered', t.text);
  // the same text a chat request is prefilled with
  const tok = await raw('/tokenize', { method: 'POST', body: JSON.stringify({ content: p }) });
  const c = await client.chat.completions.create({ model: MODEL, messages: body.messages, max_tokens: 1, temperature: 0 });
  checkEq(c.usage.prompt_tokens, tok.json.tokens.length, 'its tokens are the chat prompt');
  const bad = await raw('/apply-template', { method: 'POST', body: JSON.stringify({ messages: 'hi' }) });
  checkEq(bad.status, 400, 'bad messages: 400');
  checkEq(bad.json?.error?.param, 'messages', 'names messages');
});

await test('/v1/models default_sampling; /v1/embeddings off', async () => {
  const m = await raw('/v1/models');
  const d = m.json?.data?.[0]?.default_sampling;
  check(near(d?.temperature, 0.8) && d?.top_k === 40, 'default_sampling', JSON.stringify(d));
  const e = await raw('/v1/embeddings', { method: 'POST', body: JSON.stringify({ input: 'x' }) });
  checkEq(e.status, 501, 'embeddings without --embeddings: 501');
  check(/Start it with `--embeddings`/.test(e.json?.error?.message ?? ''), 'says to start with --embeddings', e.text);
});

// With llama.cpp's defaults (temperature 0.8) two seeds give different texts
// on these random weights: the control that makes the check below meaningful.
const texts = async (c, extra = {}) => {
  const out = [];
  for (const seed of [1, 2, 3]) {
    const r = await c.chat.completions.create({ model: MODEL, messages: msgs, max_tokens: 16, seed, ...extra });
    out.push(r.choices[0].message.content + '|' + r.choices[0].message.reasoning_content);
  }
  return out;
};
await test('llama.cpp defaults sample (control)', async () => {
  const t = await texts(client);
  check(new Set(t).size > 1, 'seeds 1, 2, 3 give different texts at temperature 0.8', JSON.stringify(t));
});

if (SURL) {
  const sc = new OpenAI({ baseURL: `${SURL}/v1`, apiKey: KEY, maxRetries: 0, timeout: 120_000 });
  await test("the model's recommended sampling", async () => {
    const r = await fetch(`${SURL}/props`, { headers: { Authorization: `Bearer ${KEY}` } }).then((x) => x.json());
    const p = r.default_generation_settings.params;
    check(p.temperature === 0 && p.top_k === 7 && near(p.top_p, 0.5) && near(p.min_p, 0.25) && near(p.repeat_penalty, 1.5),
      '/props shows the file\'s values', JSON.stringify(p));
    checkEq(JSON.stringify(r.default_generation_settings.sampling_from_model),
      JSON.stringify(['temperature', 'top_k', 'top_p', 'min_p', 'repeat_penalty']), 'all five from the model');
    const m = await fetch(`${SURL}/v1/models`, { headers: { Authorization: `Bearer ${KEY}` } }).then((x) => x.json());
    checkEq(m.data[0].default_sampling.temperature, 0, '/v1/models default_sampling.temperature');
    // temperature 0 from the file: no request temperature, any seed, the greedy text
    const t = await texts(sc);
    checkEq(new Set(t).size, 1, 'without temperature every seed gives one text', JSON.stringify(t));
    const g = await texts(sc, { temperature: 0, repeat_penalty: 1.5 });
    checkEq(t[0], g[0], 'that text is the greedy one with the file\'s repetition penalty');
    // the request overrides the file
    const hot = await texts(sc, { temperature: 1.0, top_k: 0, top_p: 1, min_p: 0 });
    check(new Set(hot).size > 1, 'a request temperature overrides the file (seeds differ again)', JSON.stringify(hot));
  });
}

process.exit(report('props suite'));
