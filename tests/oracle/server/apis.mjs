// The Responses API (openai@6: responses.create, responses.stream) and
// Anthropic's Messages API (@anthropic-ai/sdk: messages.create,
// messages.stream, messages.countTokens) on the real engine: text and a
// forced function tool (random weights never call tools by themselves),
// whole and streamed at the same seed (a `seed` extension on both), the
// event sequences, a tool loop's second turn, count_tokens against the
// usage of a generation, errors in each API's shape.
// Env: INFERNO_URL, INFERNO_KEY, INFERNO_MODEL (the --alias).
import Anthropic from '@anthropic-ai/sdk';
import { BASE, KEY, MODEL, client, check, checkEq, test, report, raw } from './lib.mjs';

const anthropic = new Anthropic({ baseURL: BASE, apiKey: KEY, maxRetries: 0, timeout: 120_000 });

const weatherParams = {
  type: 'object',
  properties: { city: { type: 'string', maxLength: 12 }, days: { type: 'integer' } },
  required: ['city', 'days'],
  additionalProperties: false,
};
// The arguments follow the schema (the grammar forced them).
function argsOk(a) {
  return a && typeof a === 'object' && typeof a.city === 'string' && a.city.length <= 12 &&
    Number.isInteger(a.days) && Object.keys(a).length === 2;
}
const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);

// ---- Responses ----

// What a Responses output says, without the ids that differ per response.
const outputShape = (out) => out.map((it) => it.type === 'function_call'
  ? { type: it.type, name: it.name, arguments: it.arguments, status: it.status }
  : { type: it.type, status: it.status, content: it.content });

// Streams a Responses request; returns the events and the SDK's final response.
async function streamResponse(params) {
  const s = client.responses.stream(params);
  const events = [];
  for await (const ev of s) events.push(ev);
  let final = null;
  try { final = await s.finalResponse(); } catch (e) { final = { error: String(e) }; }
  return { events, final };
}

// The event sequence is well formed: sequence numbers, created first, the
// items' added/done pairs in order, the last event holding the response.
function checkResponseEvents(events, what) {
  check(events.every((e, i) => e.sequence_number === i), `${what}: sequence_number 0, 1, ...`);
  checkEq(events[0]?.type, 'response.created', `${what}: first event`);
  checkEq(events[1]?.type, 'response.in_progress', `${what}: second event`);
  const last = events[events.length - 1];
  check(['response.completed', 'response.incomplete'].includes(last?.type), `${what}: last event`,
        last?.type);
  let open = -1, ok = true, n = 0;
  for (const e of events.slice(2, -1)) {
    if (e.type === 'response.output_item.added') { ok &&= open < 0 && e.output_index === n; open = n++; }
    else if (e.type === 'response.output_item.done') { ok &&= e.output_index === open; open = -1; }
    else ok &&= e.output_index === open;
  }
  check(ok && open < 0, `${what}: items open and close in order`);
  return last?.response;
}

const textReq = {
  model: MODEL, input: [{ role: 'user', content: 'Write a short poem about the sea.' }],
  instructions: 'You are terse.', max_output_tokens: 12, temperature: 0.9, seed: 42,
  reasoning: { effort: 'none' },
};

let wholeText;
await test('responses.create, text', async () => {
  const r = await client.responses.create(textReq);
  wholeText = r;
  check(r.id.startsWith('resp_'), 'id resp_', r.id);
  checkEq(r.object, 'response', 'object');
  checkEq(r.model, MODEL, 'model');
  check(['completed', 'incomplete'].includes(r.status), 'status', r.status);
  if (r.status === 'incomplete') {
    checkEq(r.incomplete_details?.reason, 'max_output_tokens', 'incomplete_details');
    checkEq(r.usage.output_tokens, 12, 'output_tokens at the limit');
  }
  checkEq(r.instructions, 'You are terse.', 'instructions echoed');
  checkEq(r.max_output_tokens, 12, 'max_output_tokens echoed');
  checkEq(r.output.length, 1, 'one output item');
  const m = r.output[0];
  checkEq(m?.type, 'message', 'a message item');
  checkEq(m?.role, 'assistant', 'role');
  checkEq(m?.content?.[0]?.type, 'output_text', 'output_text');
  check(typeof r.output_text === 'string' && r.output_text.length > 0, 'output_text (SDK helper)');
  checkEq(r.output_text, m?.content?.[0]?.text, 'SDK output_text is the message text');
  check(r.usage.input_tokens > 0, 'input_tokens');
  checkEq(r.usage.total_tokens, r.usage.input_tokens + r.usage.output_tokens, 'total_tokens');
  check(Number.isInteger(r.usage.input_tokens_details?.cached_tokens), 'cached_tokens');
});

await test('responses.stream, text = whole at the same seed', async () => {
  const { events, final } = await streamResponse(textReq);
  const resp = checkResponseEvents(events, 'text stream');
  const deltas = events.filter((e) => e.type === 'response.output_text.delta');
  check(deltas.length > 0, 'output_text deltas');
  const streamed = deltas.map((e) => e.delta).join('');
  checkEq(streamed, wholeText.output_text, 'deltas joined = the whole text');
  checkEq(resp?.status, wholeText.status, 'status');
  check(same(outputShape(resp?.output ?? []), outputShape(wholeText.output)),
        'final response output = whole output');
  checkEq(resp?.usage?.output_tokens, wholeText.usage.output_tokens, 'output_tokens');
  checkEq(resp?.usage?.input_tokens, wholeText.usage.input_tokens, 'input_tokens');
  // the SDK's accumulated snapshot has the same text
  checkEq(final?.output?.[0]?.content?.[0]?.text, wholeText.output_text, 'SDK snapshot text');
  const done = events.find((e) => e.type === 'response.output_text.done');
  checkEq(done?.text, wholeText.output_text, 'output_text.done text');
});

const toolReq = {
  model: MODEL, input: 'What is the weather in Paris for 3 days?', max_output_tokens: 400,
  temperature: 0.7, reasoning: { effort: 'none' }, tool_choice: 'required', parallel_tool_calls: false,
  tools: [{ type: 'function', name: 'get_weather', description: 'Weather', parameters: weatherParams, strict: true }],
};

let wholeTool, toolSeed;
await test('responses.create, a function tool forced with tool_choice required', async () => {
  // a random model may write whitespace until the limit: the first seed whose call closes
  for (const seed of [1, 2, 3, 4, 5, 6]) {
    const r = await client.responses.create({ ...toolReq, seed });
    if (r.status === 'completed') { wholeTool = r; toolSeed = seed; break; }
  }
  if (!check(wholeTool, 'a forced call completed within 400 tokens for one of 6 seeds')) return;
  const calls = wholeTool.output.filter((it) => it.type === 'function_call');
  checkEq(calls.length, 1, 'one call (parallel_tool_calls false)');
  checkEq(wholeTool.output.length, 1, 'nothing but the call');
  const c = calls[0];
  checkEq(c.name, 'get_weather', 'name');
  check(c.call_id.startsWith('call_') && c.id.startsWith('fc_'), 'call_id and id', `${c.call_id} ${c.id}`);
  checkEq(c.status, 'completed', 'call status');
  let a = null;
  try { a = JSON.parse(c.arguments); } catch { /* checked below */ }
  check(argsOk(a), 'arguments follow the schema', c.arguments);
  checkEq(wholeTool.tool_choice, 'required', 'tool_choice echoed');
  checkEq(wholeTool.tools?.[0]?.name, 'get_weather', 'tools echoed');
  checkEq(wholeTool.parallel_tool_calls, false, 'parallel_tool_calls echoed');
});

await test('responses.stream, the forced call = whole at the same seed', async () => {
  if (!wholeTool) return check(false, 'no whole tool response');
  const { events, final } = await streamResponse({ ...toolReq, seed: toolSeed });
  const resp = checkResponseEvents(events, 'tool stream');
  const args = events.filter((e) => e.type === 'response.function_call_arguments.delta')
    .map((e) => e.delta).join('');
  const call = wholeTool.output[0];
  checkEq(args, call.arguments, 'argument deltas = the whole arguments');
  const done = events.find((e) => e.type === 'response.function_call_arguments.done');
  checkEq(done?.arguments, call.arguments, 'function_call_arguments.done');
  checkEq(resp?.status, 'completed', 'completed');
  check(same(outputShape(resp?.output ?? []), outputShape(wholeTool.output)), 'final output = whole');
  checkEq(final?.output?.[0]?.arguments, call.arguments, 'SDK snapshot arguments');
});

await test('responses: named tool_choice, and the tool loop\'s second turn', async () => {
  const tools = [...toolReq.tools, { type: 'function', name: 'noop', parameters: { type: 'object', properties: {} } }];
  let r = null;
  for (const seed of [2, 3, 4, 5, 6, 7]) {
    r = await client.responses.create({ ...toolReq, tools, tool_choice: { type: 'function', name: 'noop' },
      seed, max_output_tokens: 200 });
    if (r.status === 'completed') break;
  }
  checkEq(r?.status, 'completed', 'a named call completed');
  const calls = (r?.output ?? []).filter((it) => it.type === 'function_call');
  check(calls.length >= 1 && calls.every((c) => c.name === 'noop'), 'only the named function',
        JSON.stringify(calls.map((c) => c.name)));
  if (!wholeTool) return;
  const call = wholeTool.output[0];
  const r2 = await client.responses.create({
    model: MODEL, max_output_tokens: 6, seed: 3, reasoning: { effort: 'none' }, tools: toolReq.tools,
    input: [
      { role: 'user', content: toolReq.input },
      { type: 'function_call', call_id: call.call_id, name: call.name, arguments: call.arguments },
      { type: 'function_call_output', call_id: call.call_id, output: '{"temp": 21}' },
    ],
  });
  check(['completed', 'incomplete'].includes(r2.status), 'second turn answered', r2.status);
  check(r2.usage.input_tokens > wholeTool.usage.input_tokens, 'the history is in the prompt',
        `${r2.usage.input_tokens} vs ${wholeTool.usage.input_tokens}`);
});

await test('responses: 400s naming the field', async () => {
  const cases = [
    [{ previous_response_id: 'resp_x' }, 'previous_response_id'],
    [{ tools: [{ type: 'web_search' }] }, 'tools[0].type'],
    [{ input: [{ role: 'user', content: [{ type: 'input_image', image_url: 'x' }] }] }, 'input[0].content[0]'],
    [{ tool_choice: 'required' }, 'tool_choice'],
    [{ temperature: 5 }, 'temperature'],
    [{ text: { format: { type: 'json_schema', name: 's' } } }, 'text.format.schema'],
  ];
  for (const [extra, param] of cases) {
    try {
      await client.responses.create({ model: MODEL, input: 'x', max_output_tokens: 2, ...extra });
      check(false, `accepted ${JSON.stringify(extra)}`);
    } catch (e) {
      checkEq(e.status, 400, `${param}: status`);
      checkEq(e.param ?? e.error?.param, param, `${param}: param`);
    }
  }
});

await test('responses: text.format json_schema constrains the output', async () => {
  const r = await client.responses.create({
    model: MODEL, input: 'Give a city.', max_output_tokens: 60, seed: 5, reasoning: { effort: 'none' },
    text: { format: { type: 'json_schema', name: 'city', strict: true,
      schema: { type: 'object', properties: { ok: { type: 'boolean' } }, required: ['ok'], additionalProperties: false } } },
  });
  if (r.status === 'completed') {
    let j = null;
    try { j = JSON.parse(r.output_text); } catch { /* checked */ }
    check(j && typeof j.ok === 'boolean' && Object.keys(j).length === 1, 'a completed reply follows the schema', r.output_text);
  } else {
    check(/^\s*\{/.test(r.output_text) || r.output_text.trim() === '', 'a cut reply is the start of an object', r.output_text);
  }
  checkEq(r.text?.format?.type, 'json_schema', 'text.format echoed');
});

await test('responses: a request shaped as Codex CLI sends it, streamed', async () => {
  const { events } = await streamResponse({
    model: MODEL, instructions: 'You are a coding agent.', store: false, stream: true,
    include: ['reasoning.encrypted_content'], prompt_cache_key: 'session-1', parallel_tool_calls: false,
    reasoning: { effort: 'medium', summary: 'auto' }, text: { verbosity: 'medium' }, tool_choice: 'auto',
    tools: [{ type: 'function', name: 'shell', description: 'Runs a command', strict: false,
      parameters: { type: 'object', properties: { command: { type: 'array', items: { type: 'string' } } }, required: ['command'] } }],
    input: [{ type: 'message', role: 'user', content: [{ type: 'input_text', text: 'List the files.' }] }],
    max_output_tokens: 8, seed: 9,
  });
  const resp = checkResponseEvents(events, 'codex stream');
  checkEq(resp?.store, false, 'store false (nothing is stored)');
  checkEq(resp?.reasoning?.effort, 'medium', 'reasoning echoed');
});

// ---- Anthropic Messages ----

const msgReq = {
  model: MODEL, max_tokens: 12, system: 'You are terse.', seed: 42, temperature: 0.9,
  messages: [{ role: 'user', content: 'Write a short poem about the sea.' }],
};

// The event sequence is well formed: message_start, blocks started and
// stopped in order with consecutive indices, message_delta, message_stop.
function checkMessageEvents(events, what) {
  checkEq(events[0]?.type, 'message_start', `${what}: first event`);
  checkEq(events[events.length - 1]?.type, 'message_stop', `${what}: last event`);
  checkEq(events[events.length - 2]?.type, 'message_delta', `${what}: message_delta before the end`);
  let open = -1, n = 0, ok = true;
  for (const e of events.slice(1, -2)) {
    if (e.type === 'content_block_start') { ok &&= open < 0 && e.index === n; open = n++; }
    else if (e.type === 'content_block_stop') { ok &&= e.index === open; open = -1; }
    else if (e.type === 'content_block_delta') ok &&= e.index === open;
    else ok &&= e.type === 'ping';
  }
  check(ok && open < 0, `${what}: blocks open and close in order`);
}

async function streamMessage(params) {
  const s = anthropic.messages.stream(params);
  const events = [];
  s.on('streamEvent', (e) => events.push(e));
  const final = await s.finalMessage();
  return { events, final };
}

let wholeMsg;
await test('messages.create, text', async () => {
  const m = await anthropic.messages.create(msgReq);
  wholeMsg = m;
  check(m.id.startsWith('msg_'), 'id msg_', m.id);
  checkEq(m.type, 'message', 'type');
  checkEq(m.role, 'assistant', 'role');
  checkEq(m.model, MODEL, 'model');
  check(['end_turn', 'max_tokens'].includes(m.stop_reason), 'stop_reason', m.stop_reason);
  checkEq(m.stop_sequence, null, 'stop_sequence');
  if (m.stop_reason === 'max_tokens') checkEq(m.usage.output_tokens, 12, 'output_tokens at the limit');
  checkEq(m.content.length, 1, 'one block');
  checkEq(m.content[0]?.type, 'text', 'a text block');
  check(m.content[0]?.text?.length > 0, 'text');
  check(m.usage.input_tokens + m.usage.cache_read_input_tokens > 0, 'input tokens');
});

await test('messages.stream, text = whole at the same seed', async () => {
  const { events, final } = await streamMessage(msgReq);
  checkMessageEvents(events, 'text stream');
  check(events.some((e) => e.delta?.type === 'text_delta'), 'text_delta events');
  check(same(final.content, wholeMsg.content), 'content = whole',
        `${JSON.stringify(final.content)} vs ${JSON.stringify(wholeMsg.content)}`);
  checkEq(final.stop_reason, wholeMsg.stop_reason, 'stop_reason');
  checkEq(final.usage.output_tokens, wholeMsg.usage.output_tokens, 'output_tokens');
  checkEq(final.usage.input_tokens + final.usage.cache_read_input_tokens,
          wholeMsg.usage.input_tokens + wholeMsg.usage.cache_read_input_tokens, 'input tokens in all');
});

await test('messages, raw SSE: event lines and a ping event (the SDK drops pings)', async () => {
  const r = await fetch(`${BASE}/v1/messages`, {
    method: 'POST', headers: { 'x-api-key': KEY, 'content-type': 'application/json' },
    body: JSON.stringify({ ...msgReq, max_tokens: 3, stream: true }),
  });
  checkEq(r.headers.get('content-type'), 'text/event-stream', 'content type');
  const text = await r.text();
  const frames = text.split('\n\n').filter((f) => f.length);
  check(frames.every((f) => /^event: [a-z_]+\ndata: \{.*\}$/s.test(f)), 'every frame is event + data');
  check(frames.every((f) => JSON.parse(f.split('\ndata: ')[1]).type === f.slice(7, f.indexOf('\n'))),
        'each event name is its data\'s type');
  check(frames.some((f) => f.startsWith('event: ping\n')), 'a ping event');
  // (the SDK's snapshot is message_start's object, overwritten by message_delta: read it raw)
  const start = JSON.parse(frames[0].split('\ndata: ')[1]);
  checkEq(start.message?.usage?.input_tokens,
          wholeMsg.usage.input_tokens + wholeMsg.usage.cache_read_input_tokens,
          'message_start carries the prompt\'s tokens');
});

await test('messages.countTokens = the prompt a generation used', async () => {
  const { model, system, messages } = msgReq;
  const c = await anthropic.messages.countTokens({ model, system, messages });
  checkEq(c.input_tokens, wholeMsg.usage.input_tokens + wholeMsg.usage.cache_read_input_tokens,
          'input_tokens = the generation\'s prompt tokens');
  const c2 = await anthropic.messages.countTokens({ model, system, messages: [...messages,
    { role: 'assistant', content: 'Waves.' }, { role: 'user', content: 'More.' }] });
  check(c2.input_tokens > c.input_tokens, 'a longer conversation counts more', `${c2.input_tokens}`);
});

const msgTools = [{ name: 'get_weather', description: 'Weather', input_schema: weatherParams }];
const msgToolReq = {
  model: MODEL, max_tokens: 400, temperature: 0.7, tools: msgTools,
  tool_choice: { type: 'any', disable_parallel_tool_use: true },
  messages: [{ role: 'user', content: 'What is the weather in Paris for 3 days?' }],
};

let wholeMsgTool, msgSeed;
await test('messages.create, a tool forced with tool_choice any', async () => {
  for (const seed of [1, 2, 3, 4, 5, 6]) {
    const m = await anthropic.messages.create({ ...msgToolReq, seed });
    if (m.stop_reason === 'tool_use') { wholeMsgTool = m; msgSeed = seed; break; }
  }
  if (!check(wholeMsgTool, 'a forced call completed within 400 tokens for one of 6 seeds')) return;
  const uses = wholeMsgTool.content.filter((b) => b.type === 'tool_use');
  checkEq(uses.length, 1, 'one tool_use (disable_parallel_tool_use)');
  checkEq(uses[0].name, 'get_weather', 'name');
  check(uses[0].id.startsWith('toolu_'), 'id toolu_', uses[0].id);
  check(argsOk(uses[0].input), 'input follows input_schema', JSON.stringify(uses[0].input));
});

await test('messages.stream, the forced tool = whole at the same seed', async () => {
  if (!wholeMsgTool) return check(false, 'no whole tool message');
  const { events, final } = await streamMessage({ ...msgToolReq, seed: msgSeed });
  checkMessageEvents(events, 'tool stream');
  check(events.some((e) => e.delta?.type === 'input_json_delta'), 'input_json_delta events');
  const start = events.find((e) => e.type === 'content_block_start' && e.content_block.type === 'tool_use');
  checkEq(start?.content_block?.name, 'get_weather', 'content_block_start names the tool');
  check(same(final.content.map(({ id, ...b }) => b), wholeMsgTool.content.map(({ id, ...b }) => b)),
        'content = whole', `${JSON.stringify(final.content)} vs ${JSON.stringify(wholeMsgTool.content)}`);
  checkEq(final.stop_reason, 'tool_use', 'stop_reason');
});

await test('messages: the tool loop\'s second turn, tool_choice tool and none', async () => {
  if (!wholeMsgTool) return check(false, 'no whole tool message');
  const use = wholeMsgTool.content.find((b) => b.type === 'tool_use');
  const m = await anthropic.messages.create({
    model: MODEL, max_tokens: 6, seed: 3, tools: msgTools,
    messages: [...msgToolReq.messages, { role: 'assistant', content: wholeMsgTool.content },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, content: '{"temp": 21}' }] }],
  });
  check(['end_turn', 'max_tokens', 'tool_use'].includes(m.stop_reason), 'second turn answered', m.stop_reason);
  check(m.usage.input_tokens + m.usage.cache_read_input_tokens >
        wholeMsgTool.usage.input_tokens + wholeMsgTool.usage.cache_read_input_tokens, 'the history is in the prompt');
  let named = null;
  for (const seed of [1, 2, 3, 4, 5, 6]) {
    named = await anthropic.messages.create({ ...msgToolReq, tool_choice: { type: 'tool', name: 'get_weather' },
      seed, max_tokens: 250 });
    if (named.stop_reason === 'tool_use') break;
  }
  checkEq(named?.stop_reason, 'tool_use', 'tool_choice tool: a call');
  const none = await anthropic.messages.create({ ...msgToolReq, max_tokens: 8, seed: 1, tool_choice: { type: 'none' } });
  check(none.content.every((b) => b.type !== 'tool_use'), 'tool_choice none: no tool_use');
});

await test('messages: stop_sequences end the text before them', async () => {
  const base = await anthropic.messages.create({ ...msgReq, max_tokens: 24 });
  const text = base.content[0]?.text ?? '';
  // a stop string from the middle of the reply the same seed gives
  const stop = text.slice(Math.floor(text.length / 2), Math.floor(text.length / 2) + 3);
  if (!check(stop.trim().length > 0, 'a reply long enough to cut', JSON.stringify(text))) return;
  const m = await anthropic.messages.create({ ...msgReq, max_tokens: 24, stop_sequences: [stop] });
  const cut = m.content[0]?.text ?? '';
  check(text.startsWith(cut) && cut.length < text.length && !cut.includes(stop),
        'the text ends before the stop sequence', `${JSON.stringify(cut)} / ${JSON.stringify(stop)}`);
  checkEq(m.stop_reason, 'stop_sequence', 'stop_reason');
  checkEq(m.stop_sequence, stop, 'stop_sequence is the matched string');
});

await test('messages: a request shaped as Claude Code sends it, streamed', async () => {
  const { events, final } = await streamMessage({
    // (thinking enabled needs max_tokens > budget_tokens >= 1024: adaptive keeps the test short)
    model: MODEL, max_tokens: 16, stream: true, temperature: 1, metadata: { user_id: 'u-1' },
    system: [{ type: 'text', text: 'You are Claude Code.', cache_control: { type: 'ephemeral' } }],
    thinking: { type: 'adaptive' },
    tools: [{ name: 'Bash', description: 'Runs a command', input_schema: { type: 'object',
      properties: { command: { type: 'string' } }, required: ['command'] }, cache_control: { type: 'ephemeral' } }],
    messages: [{ role: 'user', content: [{ type: 'text', text: '<system-reminder>ctx</system-reminder>' },
      { type: 'text', text: 'List the files.', cache_control: { type: 'ephemeral' } }] }],
    seed: 9, stop_sequences: ['\n\nHuman:'],
  }).catch((e) => ({ events: [], final: { error: String(e) } }));
  checkMessageEvents(events, 'claude code stream');
  check(['end_turn', 'max_tokens', 'tool_use', 'stop_sequence'].includes(final?.stop_reason),
        'a stop_reason', JSON.stringify(final).slice(0, 300));
});

await test('messages: errors in Anthropic\'s shape, x-api-key', async () => {
  const cases = [
    [{ max_tokens: undefined }, 'max_tokens'],
    [{ messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'AA==' } }] }] }, 'messages[0].content[0]'],
    [{ tools: [{ type: 'bash_20250124', name: 'bash' }] }, 'tools[0].type'],
    [{ temperature: 1.5 }, 'temperature'],
    [{ thinking: { type: 'enabled', budget_tokens: 10 } }, 'thinking.budget_tokens'],
  ];
  for (const [extra, param] of cases) {
    try {
      await anthropic.messages.create({ ...msgReq, ...extra });
      check(false, `accepted ${JSON.stringify(extra)}`);
    } catch (e) {
      checkEq(e.status, 400, `${param}: status`);
      checkEq(e.error?.type, 'error', `${param}: {type: "error"}`);
      checkEq(e.error?.error?.type, 'invalid_request_error', `${param}: error.type`);
      check(String(e.error?.error?.message).includes(param), `${param}: the message names it`,
            e.error?.error?.message);
    }
  }
  const bad = new Anthropic({ baseURL: BASE, apiKey: 'wrong', maxRetries: 0 });
  try {
    await bad.messages.create(msgReq);
    check(false, 'a wrong x-api-key was accepted');
  } catch (e) {
    checkEq(e.status, 401, 'wrong key: 401');
    checkEq(e.error?.error?.type, 'authentication_error', 'wrong key: authentication_error');
  }
  // x-api-key alone (no Authorization) is the key
  const r = await raw('/v1/messages/count_tokens', {
    method: 'POST', key: null, headers: { 'x-api-key': KEY, 'anthropic-version': '2023-06-01' },
    body: JSON.stringify({ model: MODEL, messages: msgReq.messages }),
  });
  checkEq(r.status, 200, 'x-api-key alone: 200');
  check(Number.isInteger(r.json?.input_tokens), 'count_tokens body', r.text);
});

process.exit(report('apis'));
