// Tool calls and reasoning controls through the real OpenAI client (openai@6)
// on the real engine. Random weights never call a tool by themselves, so the
// calls are forced: tool_choice "required" and named (the tool-call grammar),
// or a llama.cpp `grammar` that writes two calls (to see parallel_tool_calls
// false end the reply after the first). The arguments must JSON.parse and
// validate against the tool's parameters with ajv; a streamed reply,
// assembled by the client's chat.completions.stream helper, must equal the
// whole one at the same seed; a two-step loop sends the call and its result
// back as the client returns them.
// Env: INFERNO_URL, INFERNO_KEY, INFERNO_MODEL.
import Ajv from 'ajv';
import { MODEL, client, check, checkEq, test, report, raw } from './lib.mjs';

const ajv = new Ajv({ strict: false });
const tools = [
  {
    type: 'function',
    function: {
      name: 'get_weather',
      description: 'The weather in a city.',
      parameters: {
        type: 'object',
        properties: {
          city: { type: 'string', maxLength: 12 },
          days: { type: 'integer', minimum: 1, maximum: 7 },
          units: { enum: ['metric', 'imperial'] },
        },
        required: ['city', 'days'],
        additionalProperties: false,
      },
    },
  },
  {
    type: 'function',
    function: {
      name: 'search',
      description: 'Search the web.',
      parameters: {
        type: 'object',
        properties: { query: { type: 'string', maxLength: 16 }, exact: { type: 'boolean' } },
        required: ['query'],
      },
    },
  },
];
const validators = Object.fromEntries(tools.map((t) => [t.function.name, ajv.compile(t.function.parameters)]));
const messages = [{ role: 'user', content: 'What is the weather in Paris for 3 days?' }];
// Thinking off: the grammar applies from the first token. One call per reply
// (parallel_tool_calls false): with several allowed, random weights chain an
// unbounded number of calls (the grammar's ws alone lets a call take 100+
// tokens), so a reply could hit max_tokens; two calls are tested below with a
// grammar that writes exactly two.
const base = { model: MODEL, messages, tools, reasoning_effort: 'none', temperature: 1, max_tokens: 700, parallel_tool_calls: false };

// Checks a reply that must be tool calls only (names from `names`); returns them.
function checkCalls(r, names, what) {
  const c = r.choices[0];
  checkEq(c.finish_reason, 'tool_calls', `${what}: finish_reason`);
  const calls = c.message.tool_calls ?? [];
  check(calls.length >= 1, `${what}: message.tool_calls`, JSON.stringify(c.message));
  check(!c.message.content, `${what}: no content besides the calls`, JSON.stringify(c.message.content));
  const ids = new Set();
  for (const [i, call] of calls.entries()) {
    checkEq(call.type, 'function', `${what}: call ${i} type`);
    check(typeof call.id === 'string' && call.id.length > 0 && !ids.has(call.id), `${what}: call ${i} id unique`, call.id);
    ids.add(call.id);
    const name = call.function?.name;
    check(names.includes(name), `${what}: call ${i} name`, name);
    let args;
    try {
      args = JSON.parse(call.function.arguments);
    } catch (e) {
      check(false, `${what}: call ${i} arguments parse`, call.function.arguments);
      continue;
    }
    const v = validators[name];
    check(v && v(args), `${what}: call ${i} arguments follow ${name}'s parameters`,
      `${call.function.arguments} ${JSON.stringify(v?.errors)}`);
  }
  return calls;
}

const simple = (calls) => calls.map((c) => ({ name: c.function.name, arguments: c.function.arguments }));

await test('tool_choice required: whole and streamed, same seed', async () => {
  for (const seed of [1, 2, 3]) {
    const whole = await client.chat.completions.create({ ...base, tool_choice: 'required', seed });
    const calls = checkCalls(whole, ['get_weather', 'search'], `required seed ${seed}`);
    const stream = client.chat.completions.stream({ ...base, tool_choice: 'required', seed });
    const fin = await stream.finalChatCompletion();
    const scalls = checkCalls(fin, ['get_weather', 'search'], `required seed ${seed} streamed`);
    checkEq(JSON.stringify(simple(scalls)), JSON.stringify(simple(calls)), `seed ${seed}: streamed calls equal whole`);
    checkEq(fin.choices[0].finish_reason, whole.choices[0].finish_reason, `seed ${seed}: streamed finish_reason`);
  }
});

await test('tool_choice named', async () => {
  for (const seed of [5]) {
    const choice = { type: 'function', function: { name: 'search' } };
    const r = await client.chat.completions.create({ ...base, tool_choice: choice, seed });
    const calls = checkCalls(r, ['search'], `named seed ${seed}`);
    const fin = await client.chat.completions.stream({ ...base, tool_choice: choice, seed }).finalChatCompletion();
    checkEq(JSON.stringify(simple(fin.choices[0].message.tool_calls ?? [])), JSON.stringify(simple(calls)),
      `named seed ${seed}: streamed calls equal whole`);
  }
});

await test('tool_choice required with thinking on', async () => {
  // the grammar waits for a </think> when the reply opens with <think>, else starts at once
  const { reasoning_effort, ...thinking } = base;
  const r = await client.chat.completions.create({ ...thinking, tool_choice: 'required', seed: 11 });
  checkCalls(r, ['get_weather', 'search'], 'required, thinking on');
});

// A grammar that writes two calls: parallel_tool_calls false keeps one.
const twoCalls = 'root ::= call "\\n" call\n' +
  'call ::= "<tool_call>\\n{\\"name\\": \\"search\\", \\"arguments\\": {\\"query\\": \\"" [a-z]{1,6} "\\"}}\\n</tool_call>"';
await test('parallel_tool_calls', async () => {
  for (const parallel of [true, false]) {
    const req = { ...base, grammar: twoCalls, parallel_tool_calls: parallel, seed: 7, max_tokens: 200 };
    const r = await client.chat.completions.create(req);
    const calls = checkCalls(r, ['search'], `parallel ${parallel}`);
    checkEq(calls.length, parallel ? 2 : 1, `parallel_tool_calls ${parallel}: number of calls`);
    const fin = await client.chat.completions.stream(req).finalChatCompletion();
    checkEq(JSON.stringify(simple(fin.choices[0].message.tool_calls ?? [])), JSON.stringify(simple(calls)),
      `parallel ${parallel}: streamed calls equal whole`);
  }
  // forced with one call allowed: exactly one
  for (const seed of [8, 9, 10]) {
    const one = await client.chat.completions.create({ ...base, tool_choice: 'required', seed });
    checkEq(checkCalls(one, ['get_weather', 'search'], 'required, not parallel').length, 1, `required, not parallel, seed ${seed}: one call`);
  }
});

await test('two-step tool loop', async () => {
  const first = await client.chat.completions.create({ ...base, tool_choice: { type: 'function', function: { name: 'get_weather' } }, seed: 9 });
  const calls = checkCalls(first, ['get_weather'], 'loop step 1');
  if (!calls.length) return;
  const history = [
    ...messages,
    first.choices[0].message, // as the client returns it: content null, arguments a JSON string
    ...calls.map((c) => ({ role: 'tool', tool_call_id: c.id, content: JSON.stringify({ temp: 18, sky: 'cloudy' }) })),
  ];
  const second = await client.chat.completions.create({ model: MODEL, messages: history, tools, reasoning_effort: 'none', temperature: 0, max_tokens: 8 });
  const c = second.choices[0];
  check(['stop', 'length'].includes(c.finish_reason), 'loop step 2: finish_reason', c.finish_reason);
  check(typeof c.message.content === 'string', 'loop step 2: content is text', JSON.stringify(c.message));
  // the call and its result are in the prompt: it grew by more than the tool message's text
  check(second.usage.prompt_tokens > first.usage.prompt_tokens + 10, 'loop step 2: prompt holds the call and the result',
    `${first.usage.prompt_tokens} -> ${second.usage.prompt_tokens}`);
  // the first turn's prompt is a prefix of the second's: served from the cache
  check((second.usage.prompt_tokens_details?.cached_tokens ?? 0) > 0, 'loop step 2: cached_tokens',
    JSON.stringify(second.usage));
  // the same history with tool_choice none: no tools in the prompt, so a shorter one
  const none = await client.chat.completions.create({ model: MODEL, messages: history, tools, tool_choice: 'none', reasoning_effort: 'none', temperature: 0, max_tokens: 1 });
  check(none.usage.prompt_tokens < second.usage.prompt_tokens - 50, 'tool_choice none: no tools in the prompt',
    `${none.usage.prompt_tokens} vs ${second.usage.prompt_tokens}`);
});

await test('reasoning_effort and logit_bias', async () => {
  const on = await client.chat.completions.create({ model: MODEL, messages, max_tokens: 1, temperature: 0 });
  const off = await client.chat.completions.create({ model: MODEL, messages, max_tokens: 1, temperature: 0, reasoning_effort: 'none' });
  const low = await client.chat.completions.create({ model: MODEL, messages, max_tokens: 1, temperature: 0, reasoning_effort: 'low' });
  check(off.usage.prompt_tokens > on.usage.prompt_tokens, 'reasoning_effort none: the empty think block is in the prompt',
    `${on.usage.prompt_tokens} vs ${off.usage.prompt_tokens}`);
  checkEq(low.usage.prompt_tokens, on.usage.prompt_tokens, 'reasoning_effort low: thinking stays on');
  // Two one-token words: +100 on either makes greedy write only it.
  const ids = {};
  for (const w of [' sea', ' sky']) {
    const t = await raw('/tokenize', { method: 'POST', body: JSON.stringify({ content: w, with_pieces: true }) });
    checkEq(t.json?.tokens?.length, 1, `'${w}' is one token`);
    ids[w] = t.json?.tokens?.[0]?.id;
  }
  const A = ids[' sea'], B = ids[' sky'];
  const greedy = async (bias) => (await client.completions.create({
    model: MODEL, prompt: 'Once upon a time', max_tokens: 4, temperature: 0, logit_bias: bias,
  })).choices[0].text;
  checkEq(await greedy({ [A]: 100 }), ' sea'.repeat(4), 'logit_bias +100: only that token');
  checkEq(await greedy({ [B]: 100 }), ' sky'.repeat(4), 'logit_bias +100 on another: only it');
  // -100 on the token greedy picks first (its id: the reply re-tokenized,
  // when the first piece is the token logprobs names): another one comes.
  const first = async (bias) => (await client.completions.create({
    model: MODEL, prompt: 'Once upon a time', max_tokens: 1, temperature: 0, logprobs: 1, logit_bias: bias,
  })).choices[0].logprobs.tokens[0];
  const top = await first(undefined);
  const t = (await raw('/tokenize', { method: 'POST', body: JSON.stringify({ content: top, with_pieces: true }) })).json?.tokens ?? [];
  checkEq(t[0]?.piece, top, 'the greedy token re-tokenizes to itself');
  const next = await first({ [t[0]?.id]: -100 });
  check(next !== top, 'logit_bias -100 on the greedy token: another token', `${JSON.stringify(top)} -> ${JSON.stringify(next)}`);
  checkEq(await first({ [t[0]?.id]: 0.0 }), top, 'logit_bias 0: the same token');
  const chat = await client.chat.completions.create({ model: MODEL, messages, max_tokens: 3, temperature: 0, reasoning_effort: 'none', logit_bias: { [B]: 100 } });
  checkEq(chat.choices[0].message.content, ' sky'.repeat(3), 'chat logit_bias +100');
});

await test('bad tool requests: 400 naming the field', async () => {
  const post = (body) => raw('/v1/chat/completions', { method: 'POST', body: JSON.stringify({ model: MODEL, messages, ...body }) });
  const cases = [
    [{ tools, tool_choice: { type: 'function', function: { name: 'launch' } } }, 'tool_choice', "'launch'"],
    [{ tool_choice: 'required' }, 'tool_choice', 'tools'],
    [{ tools, tool_choice: 'always' }, 'tool_choice', 'always'],
    [{ tools: [{ type: 'function', function: { name: 'x', parameters: 'no' } }] }, 'tools[0]', 'parameters'],
    [{ tools, tool_choice: 'required', response_format: { type: 'json_object' } }, 'tool_choice', 'response_format'],
    [{ logit_bias: { 99999999: 1 } }, 'logit_bias', 'n_vocab'],
    [{ logit_bias: { 5: 200 } }, 'logit_bias', 'range'],
    [{ reasoning_effort: 'extreme' }, 'reasoning_effort', 'extreme'],
    [{ messages: [...messages, { role: 'assistant', content: null, tool_calls: [{ id: 'c', type: 'function', function: { name: 'search', arguments: '{"query": ' } }] }] },
      'messages[1].tool_calls[0]', 'arguments'],
  ];
  for (const [body, param, word] of cases) {
    const r = await post(body);
    checkEq(r.status, 400, `${param} (${JSON.stringify(body).slice(0, 80)}): status`);
    checkEq(r.json?.error?.param, param, `${param}: error.param`);
    check((r.json?.error?.message ?? '').includes(word), `${param}: the message says ${word}`, r.json?.error?.message);
  }
});

process.exit(report('tools'));
