// Ollama's API through the npm `ollama` client (0.6.4): chat and generate,
// whole and streamed (NDJSON), against the server's own OpenAI endpoints
// for the same conversation under greedy sampling (so that the text cannot
// match by accident); options (num_predict, stop, num_ctx), format "json"
// and a schema (checked with ajv), think, tools, logprobs, the model-list
// endpoints (tags, show, ps, version), a model name that is not served, the
// refusals by name as the client sees them, the API key, and /api/embed
// against /v1/embeddings on a server started with --embeddings.
// Env: INFERNO_URL, INFERNO_EMBD_URL, INFERNO_KEY, INFERNO_MODEL (--alias),
//      INFERNO_CTX (-c).
import { Ollama } from 'ollama';
import Ajv from 'ajv';
import { BASE, KEY, MODEL, client, check, checkEq, test, report } from './lib.mjs';

const EMBD = process.env.INFERNO_EMBD_URL;
const CTX = Number(process.env.INFERNO_CTX ?? 1024);
const headers = { Authorization: `Bearer ${KEY}` };
const ollama = new Ollama({ host: BASE, headers });
const NAME = `${MODEL}:latest`;
const GREEDY = { temperature: 0, seed: 7, num_predict: 24 };
const convo = [
  { role: 'system', content: 'You answer briefly.' },
  { role: 'user', content: 'Name three rivers of Europe.' },
];
const ajv = new Ajv({ strict: false });

// The client's error as it throws it: message and status.
async function refused(fn) {
  try {
    await fn();
  } catch (e) {
    return { message: String(e?.message ?? e), status: e?.status_code };
  }
  return { message: '(accepted)', status: 200 };
}

async function collect(stream) {
  const r = { content: '', thinking: '', lines: [], calls: [] };
  for await (const part of stream) {
    r.lines.push(part);
    const m = part.message ?? part;
    r.content += m.content ?? m.response ?? '';
    r.thinking += m.thinking ?? '';
    if (m.tool_calls) r.calls.push(...m.tool_calls);
  }
  r.last = r.lines[r.lines.length - 1];
  return r;
}

await test('ollama: version, tags, ps, show', async () => {
  const v = await ollama.version();
  check(/^\d+\.\d+\.\d+/.test(v.version), 'version is semver', v.version);
  const tags = await ollama.list();
  checkEq(tags.models.length, 1, 'one model');
  const m = tags.models[0];
  checkEq(m.name, NAME, 'tags: name');
  checkEq(m.model, NAME, 'tags: model');
  check(m.size > 1_000_000, 'tags: size is the file size', m.size);
  check(/^[0-9a-f]{64}$/.test(m.digest), 'tags: digest', m.digest);
  check(!Number.isNaN(Date.parse(m.modified_at)), 'tags: modified_at is a time', m.modified_at);
  checkEq(m.details.format, 'gguf', 'details.format');
  checkEq(m.details.family, 'qwen3', 'details.family');
  check(/^\d+(\.\d+)?[KMB]$/.test(m.details.parameter_size), 'details.parameter_size', m.details.parameter_size);
  checkEq(m.details.quantization_level, 'Q8_0', 'details.quantization_level');
  const ps = await ollama.ps();
  checkEq(ps.models[0]?.name, NAME, 'ps: name');
  checkEq(ps.models[0]?.size_vram, 0, 'ps: size_vram');
  checkEq(ps.models[0]?.context_length, CTX, 'ps: context_length');
  check(Date.parse(ps.models[0]?.expires_at) > Date.now(), 'ps: expires_at in the future');
  const show = await ollama.show({ model: MODEL });
  check(show.capabilities.includes('completion') && show.capabilities.includes('tools') &&
        show.capabilities.includes('thinking'), 'show: capabilities', show.capabilities);
  checkEq(show.model_info['general.architecture'], 'qwen3', 'show: general.architecture');
  check(show.model_info['general.parameter_count'] > 0, 'show: general.parameter_count');
  checkEq(show.model_info['qwen3.context_length'] > 0, true, 'show: qwen3.context_length');
  check(show.template.includes('<|im_start|>'), 'show: the chat template');
  check(/temperature/.test(show.parameters) && /FROM /.test(show.modelfile), 'show: parameters and modelfile');
  const nf = await refused(() => ollama.show({ model: 'llama3.2' }));
  checkEq(nf.status, 404, 'show: another name is 404');
  check(/model 'llama3.2' not found/.test(nf.message), 'show: not found says so', nf.message);
});

let whole;
await test('ollama: chat, whole, equals /v1/chat/completions', async () => {
  whole = await ollama.chat({ model: MODEL, messages: convo, options: GREEDY, think: false });
  checkEq(whole.model, MODEL, 'model as sent');
  checkEq(whole.message.role, 'assistant', 'role');
  checkEq(whole.done, true, 'done');
  check(['stop', 'length'].includes(whole.done_reason), 'done_reason', whole.done_reason);
  for (const k of ['total_duration', 'load_duration', 'prompt_eval_count', 'prompt_eval_duration', 'eval_count', 'eval_duration'])
    check(Number.isInteger(whole[k]) && whole[k] >= 0, `${k} is an integer (ns or a count)`, whole[k]);
  check(whole.eval_duration > 1000, 'eval_duration in nanoseconds', whole.eval_duration);
  check(whole.total_duration >= whole.eval_duration, 'total_duration covers eval_duration');
  const o = await client.chat.completions.create({
    model: MODEL, messages: convo, temperature: 0, seed: 7, max_tokens: 24,
    chat_template_kwargs: { enable_thinking: false },
  });
  check(whole.message.content.length > 0, 'some text');
  checkEq(whole.message.content, o.choices[0].message.content ?? '', 'the same text as /v1/chat/completions');
  checkEq(whole.eval_count, o.usage.completion_tokens, 'eval_count = completion_tokens');
  checkEq(whole.prompt_eval_count, o.usage.prompt_tokens, 'prompt_eval_count = prompt_tokens');
  checkEq(whole.done_reason, o.choices[0].finish_reason, 'done_reason = finish_reason');
  // with "tiny:latest" and in another case the same model
  const again = await ollama.chat({ model: NAME.toUpperCase(), messages: convo, options: GREEDY, think: false });
  checkEq(again.message.content, whole.message.content, 'the name with :latest, any case');
});

await test('ollama: chat, streamed, equals whole', async () => {
  const s = await collect(await ollama.chat({ model: MODEL, messages: convo, options: GREEDY, think: false, stream: true }));
  // the server frames what the reply has gained since its last frame, so a
  // loaded host may put the whole text in one line before the done one
  check(s.lines.length >= 2 && s.lines[0].message?.content, 'a text line, then the done line', s.lines.length);
  check(s.lines.slice(0, -1).every((l) => l.done === false), 'done false before the last');
  checkEq(s.last.done, true, 'the last is done');
  checkEq(s.content, whole.message.content, 'streamed text = whole text');
  checkEq(s.last.eval_count, whole.eval_count, 'eval_count');
  checkEq(s.last.done_reason, whole.done_reason, 'done_reason');
  checkEq(s.last.message.content, '', 'the last line carries no text');
  // raw: one JSON object per line, the NDJSON content type, stream by default
  const r = await fetch(`${BASE}/api/chat`, { method: 'POST', headers,
    body: JSON.stringify({ model: MODEL, messages: convo, options: { ...GREEDY, num_predict: 4 }, think: false }) });
  checkEq(r.headers.get('content-type'), 'application/x-ndjson', 'Content-Type of a stream');
  const lines = (await r.text()).split('\n');
  checkEq(lines.pop(), '', 'the stream ends with a newline');
  check(lines.every((l) => { try { return typeof JSON.parse(l) === 'object'; } catch { return false; } }),
    'every line is a JSON object (no ping, no blank line)');
});

await test('ollama: generate, whole and streamed, = chat with one user turn', async () => {
  const prompt = 'Name three rivers of Europe.';
  const g = await ollama.generate({ model: MODEL, prompt, system: 'You answer briefly.', options: GREEDY, think: false });
  checkEq(g.response, whole.message.content, 'generate with system + prompt = chat');
  checkEq(g.done, true, 'done');
  checkEq(g.eval_count, whole.eval_count, 'eval_count');
  const s = await collect(await ollama.generate({ model: MODEL, prompt, system: 'You answer briefly.', options: GREEDY, think: false, stream: true }));
  check(s.lines.length >= 2 && s.lines[0].response, 'a text line, then the done line', s.lines.length);
  checkEq(s.content, g.response, 'streamed = whole');
  checkEq(s.last.done_reason, g.done_reason, 'done_reason');
  // raw: the prompt as is, as /v1/completions takes it
  const rawPrompt = '<|im_start|>user\nName a colour.<|im_end|>\n<|im_start|>assistant\n';
  const gr = await ollama.generate({ model: MODEL, prompt: rawPrompt, raw: true, options: GREEDY });
  const c = await client.completions.create({ model: MODEL, prompt: rawPrompt, temperature: 0, seed: 7, max_tokens: 24 });
  checkEq(gr.response, c.choices[0].text, 'raw generate = /v1/completions');
  checkEq(gr.prompt_eval_count, c.usage.prompt_tokens, 'raw: prompt_eval_count');
  // an empty prompt loads the model
  const load = await ollama.generate({ model: MODEL, prompt: '' });
  checkEq(load.done_reason, 'load', 'empty prompt: done_reason load');
  const cload = await ollama.chat({ model: MODEL, messages: [] });
  checkEq(cload.done_reason, 'load', 'no messages: done_reason load');
  checkEq(cload.message?.role, 'assistant', 'load: the message');
});

await test('ollama: think on gives the thinking apart, = /v1 reasoning', async () => {
  const t = await ollama.chat({ model: MODEL, messages: convo, options: GREEDY, think: true });
  const o = await client.chat.completions.create({ model: MODEL, messages: convo, temperature: 0, seed: 7, max_tokens: 24 });
  checkEq(t.message.content, o.choices[0].message.content ?? '', 'think true: content = /v1 content');
  checkEq(t.message.thinking ?? '', o.choices[0].message.reasoning_content ?? '', 'think true: thinking = reasoning_content');
  const lvl = await ollama.chat({ model: MODEL, messages: convo, options: GREEDY, think: 'high' });
  checkEq(lvl.message.content, t.message.content, 'think "high" = think true (no budget in Qwen3)');
});

await test('ollama: options num_predict, stop, num_ctx, no-effect options', async () => {
  const n = await ollama.chat({ model: MODEL, messages: convo, options: { ...GREEDY, num_predict: 5 }, think: false });
  checkEq(n.eval_count, 5, 'num_predict 5 → eval_count 5');
  checkEq(n.done_reason, 'length', 'done_reason length');
  const text = whole.message.content;
  const cut = Math.min(12, Math.floor(text.length / 2));
  const stop = text.slice(cut, cut + 3);
  const s = await ollama.chat({ model: MODEL, messages: convo, options: { ...GREEDY, stop: [stop] }, think: false });
  checkEq(s.message.content, text.slice(0, text.indexOf(stop)), `stop ${JSON.stringify(stop)} ends the text before it`);
  checkEq(s.done_reason, 'stop', 'done_reason stop');
  const small = await ollama.chat({ model: MODEL, messages: convo, options: { ...GREEDY, num_predict: -1, num_ctx: whole.prompt_eval_count + 6 }, think: false });
  checkEq(small.eval_count, Math.min(6, whole.eval_count), 'num_ctx bounds prompt + reply');
  checkEq(small.message.content, whole.eval_count > 6 ? text.slice(0, small.message.content.length) : text, 'num_ctx: the start of the same text');
  if (whole.eval_count > 6) checkEq(small.done_reason, 'length', 'num_ctx: done_reason length');
  const big = await refused(() => ollama.chat({ model: MODEL, messages: convo, options: { num_ctx: CTX * 4 } }));
  checkEq(big.status, 400, 'num_ctx above the server context: 400');
  check(/options\.num_ctx/.test(big.message) && /-c/.test(big.message), 'says num_ctx and -c', big.message);
  const fine = await ollama.chat({ model: MODEL, messages: convo, keep_alive: '10m', think: false,
    options: { ...GREEDY, num_thread: 3, num_gpu: 99, use_mmap: false, num_batch: 8, main_gpu: 0, typical_p: 1, mirostat: 0 } });
  checkEq(fine.message.content, text, 'options without effect change nothing');
});

await test('ollama: format json and a schema', async () => {
  const j = await ollama.chat({ model: MODEL, messages: [{ role: 'user', content: 'Reply in JSON.' }], format: 'json',
    think: false, options: { temperature: 0, seed: 3, num_predict: 60 } });
  if (j.done_reason === 'stop') {
    let v = null;
    try { v = JSON.parse(j.message.content); } catch { /* checked */ }
    check(v !== null && typeof v === 'object' && !Array.isArray(v), 'format json: an object', j.message.content);
  } else {
    check(/^\s*\{/.test(j.message.content), 'format json, cut: the start of an object', j.message.content);
  }
  // the same grammar as response_format json_object: the same greedy text
  const oj = await client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'Reply in JSON.' }],
    response_format: { type: 'json_object' }, temperature: 0, seed: 3, max_tokens: 60, chat_template_kwargs: { enable_thinking: false } });
  checkEq(j.message.content, oj.choices[0].message.content, 'format json = response_format json_object');
  const schema = { type: 'object', properties: { ok: { type: 'boolean' }, n: { type: 'integer', minimum: 0, maximum: 9 } },
    required: ['ok', 'n'], additionalProperties: false };
  const validate = ajv.compile(schema);
  for (const seed of [1, 2]) {
    const r = await ollama.generate({ model: MODEL, prompt: 'Give ok and n.', format: schema, think: false,
      options: { temperature: 1, seed, num_predict: 40 } });
    let v = null;
    try { v = JSON.parse(r.response); } catch { /* checked */ }
    if (r.done_reason === 'stop') check(v !== null && validate(v), `schema seed ${seed}: valid`, r.response);
    else check(/^\s*\{/.test(r.response), `schema seed ${seed}, cut: an object's start`, r.response);
    const os = await client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'Give ok and n.' }],
      response_format: { type: 'json_schema', json_schema: { name: 's', schema } }, temperature: 1, seed, max_tokens: 40,
      chat_template_kwargs: { enable_thinking: false } });
    checkEq(r.response, os.choices[0].message.content, `schema seed ${seed} = response_format json_schema`);
  }
});

await test('ollama: tools and a tool-call history are accepted', async () => {
  const tools = [{ type: 'function', function: { name: 'get_weather', description: 'Weather of a city',
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } } }];
  const messages = [
    { role: 'user', content: 'Weather in Paris?' },
    { role: 'assistant', content: '', tool_calls: [{ function: { name: 'get_weather', arguments: { city: 'Paris' } } }] },
    { role: 'tool', content: 'sunny', tool_name: 'get_weather' },
  ];
  const r = await ollama.chat({ model: MODEL, messages, tools, options: GREEDY, think: false });
  checkEq(r.done, true, 'answered');
  const o = await client.chat.completions.create({ model: MODEL, temperature: 0, seed: 7, max_tokens: 24, tools,
    chat_template_kwargs: { enable_thinking: false },
    messages: [messages[0], { role: 'assistant', content: '', tool_calls: [{ id: 'c1', type: 'function',
      function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }] }, { role: 'tool', tool_call_id: 'c1', content: 'sunny' }] });
  checkEq(r.message.content, o.choices[0].message.content ?? '', 'the same prompt as OpenAI tools + tool_calls render');
  for (const c of r.message.tool_calls ?? [])
    check(typeof c.function.arguments === 'object', 'a parsed call has object arguments');
  const bad = await refused(() => ollama.chat({ model: MODEL, messages: [{ role: 'assistant', content: '',
    tool_calls: [{ function: { name: 'f', arguments: '{"a":1}' } }] }] }));
  check(bad.status === 400 && /messages\[0\]\.tool_calls\[0\]/.test(bad.message) && /arguments/.test(bad.message),
    'string arguments are refused by name', bad.message);
});

await test('ollama: logprobs', async () => {
  const r = await ollama.chat({ model: MODEL, messages: convo, think: false, logprobs: true, top_logprobs: 2,
    options: { ...GREEDY, num_predict: 4 } });
  checkEq(r.logprobs?.length, 4, 'one entry per token');
  check(r.logprobs?.every((l) => typeof l.token === 'string' && l.logprob <= 0 && l.top_logprobs.length === 2),
    'token, logprob, top_logprobs');
  const s = await collect(await ollama.chat({ model: MODEL, messages: convo, think: false, logprobs: true, stream: true,
    options: { ...GREEDY, num_predict: 4 } }));
  checkEq(s.lines.flatMap((l) => l.logprobs ?? []).map((l) => l.token).join(''),
    r.logprobs?.map((l) => l.token).join(''), 'streamed logprobs = whole');
});

await test('ollama: refusals by name, as the client sees them', async () => {
  const cases = [
    [{ options: { mirostat: 2 } }, 'options.mirostat'],
    [{ options: { typical_p: 0.5 } }, 'options.typical_p'],
    [{ options: { temprature: 0.1 } }, 'options.temprature'],
    [{ options: { num_predict: 0 } }, 'options.num_predict'],
    [{ format: 'xml' }, 'format'],
    [{ think: 'lots' }, 'think'],
    [{ messages: [{ role: 'user', content: 'hi', images: ['aGVsbG8='] }] }, 'messages[0].images'],
  ];
  for (const [extra, field] of cases) {
    for (const stream of [false, true]) {
      const e = await refused(async () => {
        const r = await ollama.chat({ model: MODEL, messages: convo, ...extra, stream });
        if (stream) for await (const _ of r) { /* drain */ }
      });
      check(e.status === 400 && e.message.includes(`'${field}'`), `${field} (stream ${stream}) is a 400 naming it`, `${e.status} ${e.message}`);
    }
  }
  for (const [extra, field] of [[{ suffix: 'x' }, 'suffix'], [{ template: '{{ .Prompt }}' }, 'template'],
    [{ context: [1, 2] }, 'context'], [{ images: ['aGVsbG8='] }, 'images'], [{ raw: true, system: 's' }, 'system']]) {
    const e = await refused(() => ollama.generate({ model: MODEL, prompt: 'hi', ...extra }));
    check(e.status === 400 && e.message.includes(`'${field}'`), `generate ${field} is a 400 naming it`, `${e.status} ${e.message}`);
  }
  const nf = await refused(() => ollama.chat({ model: 'qwen3:8b', messages: convo }));
  check(nf.status === 404 && /model 'qwen3:8b' not found/.test(nf.message), 'another model: 404 not found', nf.message);
  const pull = await refused(() => ollama.pull({ model: 'llama3.2' }));
  check(pull.status === 404 && /not served/.test(pull.message), 'pull: 404, nothing is pulled', `${pull.status} ${pull.message}`);
  const emb = await refused(() => ollama.embed({ model: MODEL, input: 'x' }));
  check(emb.status === 501 && /--embeddings/.test(emb.message), 'embed on a generating server: 501', emb.message);
  const nokey = new Ollama({ host: BASE });
  const k = await refused(() => nokey.chat({ model: MODEL, messages: convo }));
  check(k.status === 401 && /API key/.test(k.message), 'no key: 401 with the reason', k.message);
  const badjson = await fetch(`${BASE}/api/generate`, { method: 'POST', headers, body: '{"model":' });
  const bj = await badjson.json();
  check(badjson.status === 400 && typeof bj.error === 'string' && /JSON/.test(bj.error), 'bad JSON: {"error"} 400', JSON.stringify(bj));
});

if (EMBD) {
  await test('ollama: /api/embed = /v1/embeddings (--embeddings)', async () => {
    const e = new Ollama({ host: EMBD, headers });
    const input = ['The sea is wide.', 'rivers and lakes'];
    const r = await e.embed({ model: MODEL, input, keep_alive: '1m', truncate: true });
    const openai = await fetch(`${EMBD}/v1/embeddings`, { method: 'POST', headers: { ...headers, 'Content-Type': 'application/json' },
      body: JSON.stringify({ model: MODEL, input, encoding_format: 'float' }) }).then((x) => x.json());
    checkEq(r.embeddings.length, 2, 'two vectors');
    checkEq(r.model, MODEL, 'model as sent');
    check(r.embeddings.every((v, i) => v.length === openai.data[i].embedding.length &&
      v.every((x, k) => x === openai.data[i].embedding[k])), 'the same numbers as /v1/embeddings');
    checkEq(r.prompt_eval_count, openai.usage.prompt_tokens, 'prompt_eval_count = prompt_tokens');
    check(Number.isInteger(r.total_duration) && r.total_duration > 0, 'total_duration');
    const one = await e.embed({ model: MODEL, input: input[1], dimensions: 16 });
    checkEq(one.embeddings[0].length, 16, 'a string input, dimensions');
    const legacy = await e.embeddings({ model: MODEL, prompt: input[0] });
    const norm = Math.sqrt(legacy.embedding.reduce((s, x) => s + x * x, 0));
    const d = Math.max(...legacy.embedding.map((x, i) => Math.abs(x / norm - r.embeddings[0][i])));
    check(d < 1e-6, '/api/embeddings: the unnormalized vector of the same text', d);
    const empty = await e.embed({ model: MODEL, input: [] });
    checkEq(empty.embeddings.length, 0, 'no input: no vectors');
    const gen = await refused(() => e.chat({ model: MODEL, messages: convo }));
    check(gen.status === 501, 'chat on an embeddings server: 501', gen.message);
    const bad = await refused(() => e.embed({ model: MODEL, input: [1, 2] }));
    check(bad.status === 400 && /'input'/.test(bad.message), 'token ids are not Ollama input: 400', bad.message);
    const show = await e.show({ model: NAME });
    check(show.capabilities.includes('embedding') && !show.capabilities.includes('completion'), 'show: embedding', show.capabilities);
  });
}

process.exit(report('ollama'));
