// Shared helpers for the server suites: a tiny test runner that prints
// "N passed, N failed", the openai@6 client bound to the server under test,
// and raw fetch helpers for what the client cannot send (bad JSON, no key).
import OpenAI from 'openai';

export const BASE = process.env.INFERNO_URL ?? 'http://127.0.0.1:8080';
export const KEY = process.env.INFERNO_KEY ?? 'sk-inferno-test';
export const MODEL = process.env.INFERNO_MODEL ?? 'tiny';

export const client = new OpenAI({ baseURL: `${BASE}/v1`, apiKey: KEY, maxRetries: 0, timeout: 120_000 });

let passed = 0, failed = 0;
export function check(cond, what, detail) {
  if (cond) passed++;
  else {
    failed++;
    console.error(`FAILED: ${what}${detail !== undefined ? ': ' + detail : ''}`);
  }
  return cond;
}
export function checkEq(a, b, what) {
  return check(a === b, what, `got ${JSON.stringify(a)}, expected ${JSON.stringify(b)}`);
}
export async function test(name, fn) {
  const t0 = Date.now();
  try {
    await fn();
  } catch (e) {
    failed++;
    console.error(`FAILED: ${name}: threw ${e?.stack ?? e}`);
  }
  console.error(`  ${name} (${Date.now() - t0} ms)`);
}
export function report(label) {
  console.log(`${label ? label + ': ' : ''}${passed} passed, ${failed} failed`);
  return failed === 0 ? 0 : 1;
}

export async function raw(path, { method = 'GET', body, key = KEY, headers = {} } = {}) {
  const h = { ...headers };
  if (key !== null) h.Authorization = `Bearer ${key}`;
  if (body !== undefined) h['Content-Type'] = 'application/json';
  const r = await fetch(`${BASE}${path}`, { method, body, headers: h });
  const text = await r.text();
  let json = null;
  try { json = JSON.parse(text); } catch { /* not JSON */ }
  return { status: r.status, text, json };
}

// Prometheus text -> { name: value }.
export async function metrics() {
  const r = await raw('/metrics');
  const out = {};
  for (const line of r.text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const [name, value] = line.split(' ');
    out[name] = Number(value);
  }
  return out;
}

export const sleep = (ms) => new Promise((res) => setTimeout(res, ms));

// Polls fn() until it returns truthy or ms pass; returns the last value.
export async function waitFor(fn, ms = 5000, step = 50) {
  const end = Date.now() + ms;
  let v;
  while (!(v = await fn()) && Date.now() < end) await sleep(step);
  return v;
}

// Collects a streamed chat completion: content, reasoning, chunks, usage.
export async function collectChat(stream) {
  const r = { content: '', reasoning: '', chunks: [], finish: null, usage: null, role: null, logprobs: [] };
  for await (const ch of stream) {
    r.chunks.push(ch);
    if (ch.usage) r.usage = ch.usage;
    const c = ch.choices?.[0];
    if (!c) continue;
    if (c.delta?.role) r.role = c.delta.role;
    if (typeof c.delta?.content === 'string') r.content += c.delta.content;
    if (typeof c.delta?.reasoning_content === 'string') r.reasoning += c.delta.reasoning_content;
    if (c.logprobs?.content) r.logprobs.push(...c.logprobs.content);
    if (c.finish_reason) r.finish = c.finish_reason;
  }
  return r;
}

export async function collectCompletion(stream) {
  const r = { text: '', chunks: [], finish: null, usage: null, tokens: [] };
  for await (const ch of stream) {
    r.chunks.push(ch);
    if (ch.usage) r.usage = ch.usage;
    const c = ch.choices?.[0];
    if (!c) continue;
    r.text += c.text ?? '';
    if (c.logprobs?.tokens) r.tokens.push(...c.logprobs.tokens);
    if (c.finish_reason) r.finish = c.finish_reason;
  }
  return r;
}
