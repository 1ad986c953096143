// /v1/embeddings through the real OpenAI client (openai@6), against a server
// started with --embeddings on a Qwen3-Embedding-shaped model: float and
// base64 (the client decodes base64 itself), batches, token-id inputs,
// dimensions, the usage counts, the errors, and that the generation
// endpoints answer 501 on such a server (as llama.cpp's).
// Env: INFERNO_URL, INFERNO_KEY, INFERNO_MODEL (the --alias).
import { MODEL, client, check, checkEq, test, report, raw } from './lib.mjs';

const norm = (v) => Math.sqrt(v.reduce((s, x) => s + x * x, 0));
const maxDiff = (a, b) => Math.max(...a.map((x, i) => Math.abs(x - b[i])));
let width = 0;

await test('embeddings: one text, float', async () => {
  const r = await client.embeddings.create({ model: MODEL, input: 'The sea is wide.', encoding_format: 'float' });
  checkEq(r.object, 'list', 'object');
  checkEq(r.model, MODEL, 'model');
  checkEq(r.data.length, 1, 'one embedding');
  checkEq(r.data[0].object, 'embedding', 'data object');
  checkEq(r.data[0].index, 0, 'index');
  const v = r.data[0].embedding;
  width = v.length;
  check(Array.isArray(v) && v.length > 0 && v.every(Number.isFinite), 'a vector of numbers');
  check(Math.abs(norm(v) - 1) < 1e-5, 'L2-normalized', norm(v));
  const t = await raw('/tokenize', { method: 'POST', body: JSON.stringify({ content: 'The sea is wide.' }) });
  checkEq(r.usage.prompt_tokens, t.json.tokens.length + 1, 'usage: the text tokens and the appended <|endoftext|>');
  checkEq(r.usage.total_tokens, r.usage.prompt_tokens, 'total_tokens');
});

await test('embeddings: base64 equals float', async () => {
  const input = ['first text', 'a second, longer text about rivers and lakes'];
  const f = await client.embeddings.create({ model: MODEL, input, encoding_format: 'float' });
  const b = await client.embeddings.create({ model: MODEL, input, encoding_format: 'base64' });
  // without encoding_format the client asks for base64 and decodes it
  const d = await client.embeddings.create({ model: MODEL, input });
  checkEq(b.data.length, 2, 'two embeddings');
  for (let i = 0; i < 2; i++) {
    checkEq(b.data[i].index, i, `index ${i}`);
    check(typeof b.data[i].embedding === 'string', 'base64 comes as a string');
    const bytes = Buffer.from(b.data[i].embedding, 'base64');
    const v = Array.from(new Float32Array(bytes.buffer, bytes.byteOffset, bytes.length / 4));
    checkEq(v.length, width, 'base64 holds width floats');
    check(maxDiff(v, f.data[i].embedding) === 0, 'base64 floats equal the float response', maxDiff(v, f.data[i].embedding));
    check(maxDiff(d.data[i].embedding, f.data[i].embedding) === 0, "the client's default (base64, decoded) equals float");
  }
  check(maxDiff(f.data[0].embedding, f.data[1].embedding) > 1e-3, 'different texts, different embeddings');
});

await test('embeddings: batch order, token ids, dimensions', async () => {
  const one = await client.embeddings.create({ model: MODEL, input: 'rivers', encoding_format: 'float' });
  const many = await client.embeddings.create({ model: MODEL, input: ['lakes', 'rivers', 'seas'], encoding_format: 'float' });
  check(maxDiff(many.data[1].embedding, one.data[0].embedding) < 1e-6, 'an input embeds the same alone and in a batch');
  const t = await raw('/tokenize', { method: 'POST', body: JSON.stringify({ content: 'rivers' }) });
  const ids = [...t.json.tokens, 151643];
  const byIds = await client.embeddings.create({ model: MODEL, input: ids, encoding_format: 'float' });
  check(maxDiff(byIds.data[0].embedding, one.data[0].embedding) < 1e-6, 'token ids (with <|endoftext|>) = the text');
  const nested = await client.embeddings.create({ model: MODEL, input: [ids, ids.slice(0, -1)], encoding_format: 'float' });
  checkEq(nested.data.length, 2, 'an array of id arrays');
  check(maxDiff(nested.data[1].embedding, one.data[0].embedding) > 1e-4, 'ids are used as given (no token appended)');
  const small = await client.embeddings.create({ model: MODEL, input: 'rivers', dimensions: 16, encoding_format: 'float' });
  const v = small.data[0].embedding;
  checkEq(v.length, 16, 'dimensions truncates');
  const head = one.data[0].embedding.slice(0, 16), n = norm(head);
  check(maxDiff(v, head.map((x) => x / n)) < 1e-6, 'the first 16, renormalized');
});

await test('embeddings: errors', async () => {
  const bad = async (body, field, status = 400) => {
    const r = await raw('/v1/embeddings', { method: 'POST', body: JSON.stringify(body) });
    checkEq(r.status, status, `${JSON.stringify(body).slice(0, 60)} status`);
    checkEq(r.json?.error?.param, field, `${JSON.stringify(body).slice(0, 60)} names ${field}`);
  };
  await bad({ model: MODEL }, 'input');
  await bad({ input: [] }, 'input');
  await bad({ input: '' }, 'input');
  await bad({ input: ['ok', 3] }, 'input[1]');
  await bad({ input: [1, 'x'] }, 'input');
  await bad({ input: [[1, 2], [999999999]] }, 'input[1]');
  await bad({ input: 'x', dimensions: 0 }, 'dimensions');
  await bad({ input: 'x', dimensions: width + 1 }, 'dimensions');
  await bad({ input: 'x', dimensions: 1.5 }, 'dimensions');
  await bad({ input: 'x', encoding_format: 'int8' }, 'encoding_format');
  await bad({ input: 'x'.repeat(1), model: 7 }, 'model');
  const c = await raw('/v1/chat/completions', { method: 'POST', body: JSON.stringify({ messages: [{ role: 'user', content: 'hi' }] }) });
  checkEq(c.status, 501, 'chat on an --embeddings server: 501');
  check(/without `--embeddings`/.test(c.json?.error?.message ?? ''), 'says to start without --embeddings', c.text);
});

process.exit(report('embeddings suite'));
