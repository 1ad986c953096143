// Bounded loopback load test: CLIENTS concurrent streaming clients for
// DURATION_S seconds. Every request must end with a complete response (a
// finish_reason, the usage chunk, then the end of the stream) or a
// well-formed OpenAI error; the server must stay up and idle afterwards.
//
// Batching must not change results: at temperature 0 each stream's text is
// compared with the text the same request gets when it runs alone. The
// tolerance: the texts are equal, or they first differ at a token where the
// lone run's two best candidates were within TIE_NATS (1e-3) of each other in
// log-probability — a near-tie that float rounding in a different batch
// shape may flip. Anything else fails.
import {
  MODEL, client, check, checkEq, test, report, raw, metrics, waitFor, collectChat, collectCompletion,
} from './lib.mjs';

const CLIENTS = Number(process.env.CLIENTS ?? 16);
const DURATION_S = Number(process.env.DURATION_S ?? 20);
const TIE_NATS = 1e-3;

const specs = [
  { kind: 'completion', prompt: 'The quick brown fox', max_tokens: 10 },
  { kind: 'completion', prompt: 'In a hole in the ground there lived', max_tokens: 12 },
  { kind: 'completion', prompt: '1, 2, 3, 4,', max_tokens: 6 },
  { kind: 'completion', prompt: 'Dear diary, today I', max_tokens: 14 },
  { kind: 'chat', messages: [{ role: 'user', content: 'Name three colours.' }], max_tokens: 10 },
  { kind: 'chat', messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'What is 2+2?' }], max_tokens: 8 },
];

function request(spec, extra) {
  const common = { model: MODEL, max_tokens: spec.max_tokens, temperature: 0, ...extra };
  if (spec.kind === 'completion') return client.completions.create({ ...common, prompt: spec.prompt });
  return client.chat.completions.create({
    ...common, messages: spec.messages, chat_template_kwargs: { enable_thinking: false },
  });
}

// Where a streamed text may legitimately leave the reference: the reference
// token covering the first differing character must be a near-tie.
function nearTieAt(ref, text) {
  let i = 0;
  while (i < text.length && i < ref.text.length && text[i] === ref.text[i]) i++;
  if (!ref.tokens) return false;
  let off = 0;
  for (let k = 0; k < ref.tokens.length; k++) {
    off += ref.tokens[k].length;
    if (off > i || k === ref.tokens.length - 1) {
      const tops = ref.tops[k];
      return tops.length >= 2 && tops[0] - tops[1] < TIE_NATS;
    }
  }
  return false;
}

const refs = [];
await test('lone-client references', async () => {
  for (const spec of specs) {
    if (spec.kind === 'completion') {
      const r = await request(spec, { logprobs: 2 });
      const lp = r.choices[0].logprobs;
      refs.push({
        text: r.choices[0].text, tokens: lp.tokens,
        tops: lp.top_logprobs.map((o) => Object.values(o).sort((a, b) => b - a)),
      });
    } else {
      const r = await request(spec, { logprobs: true, top_logprobs: 2 });
      const m = r.choices[0].message;
      refs.push({
        text: (m.reasoning_content ?? '') + '\u0000' + (m.content ?? ''),
        tokens: null, tops: null,
      });
    }
  }
  checkEq(refs.length, specs.length, 'references');
});

const stats = { requests: 0, complete: 0, errors: 0, malformed: 0, mismatched: 0, ties: 0, tokens: 0 };
await test(`${CLIENTS} streaming clients for ${DURATION_S} s`, async () => {
  const deadline = Date.now() + DURATION_S * 1000;
  const t0 = Date.now();
  async function worker(w) {
    for (let it = 0; Date.now() < deadline && it < 10000; it++) {
      const k = (w + it) % specs.length;
      const spec = specs[k];
      stats.requests++;
      try {
        const s = await request(spec, { stream: true, stream_options: { include_usage: true } });
        let text, finish, usage, last;
        if (spec.kind === 'completion') {
          const r = await collectCompletion(s);
          ({ text, finish, usage } = r);
          last = r.chunks[r.chunks.length - 1];
        } else {
          const r = await collectChat(s);
          text = r.reasoning + '\u0000' + r.content;
          ({ finish, usage } = r);
          last = r.chunks[r.chunks.length - 1];
        }
        if (!finish || !usage || !Array.isArray(last?.choices) || last.choices.length !== 0) {
          stats.malformed++;
          console.error(`request ${k}: incomplete stream (finish ${finish}, usage ${!!usage})`);
          continue;
        }
        stats.complete++;
        stats.tokens += usage.completion_tokens;
        if (text !== refs[k].text) {
          if (nearTieAt(refs[k], text)) stats.ties++;
          else {
            stats.mismatched++;
            if (stats.mismatched <= 3)
              console.error(`request ${k}: batched ${JSON.stringify(text)} != lone ${JSON.stringify(refs[k].text)}`);
          }
        }
      } catch (e) {
        if (typeof e?.status === 'number' && e?.error) stats.errors++; // a well-formed API error
        else {
          stats.malformed++;
          console.error(`request ${k}: ${e}`);
        }
      }
    }
  }
  await Promise.all(Array.from({ length: CLIENTS }, (_, w) => worker(w)));
  const secs = (Date.now() - t0) / 1000;
  console.error(`  load: ${stats.requests} requests, ${stats.complete} complete, ${stats.errors} API errors, `
    + `${stats.malformed} malformed, ${stats.mismatched} mismatched, ${stats.ties} near-tie divergences, `
    + `${(stats.tokens / secs).toFixed(1)} generated tok/s aggregate`);
  check(stats.requests > 0 && stats.complete > 0, 'requests completed');
  checkEq(stats.malformed, 0, 'every request ended complete or with a well-formed error');
  checkEq(stats.errors, 0, 'no API errors under load');
  checkEq(stats.mismatched, 0, 'batched text equals lone text (up to near-ties)');
});

await test('server idle and healthy afterwards', async () => {
  const idle = await waitFor(async () => {
    const m = await metrics();
    return m['llamacpp:requests_processing'] === 0 && m['llamacpp:requests_deferred'] === 0;
  }, 5000);
  check(!!idle, 'no request processing or deferred after the load');
  const m = await metrics();
  check(m['llamacpp:n_busy_slots_per_decode'] > 1, 'decode steps were batched across slots',
    m['llamacpp:n_busy_slots_per_decode']);
  checkEq((await raw('/health', { key: null })).status, 200, '/health');
});

process.exit(report('server load'));
