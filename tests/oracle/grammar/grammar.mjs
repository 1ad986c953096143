// Constrained decoding through the server, checked by oracles inferno did not
// write: real-world-style JSON Schemas (nested objects, arrays of objects,
// enums, $ref recursion, optional fields, patterns, formats, integer ranges)
// sampled at temperature 1.0 on the random-weight model, every output
// validated by ajv (with ajv-formats); json_object outputs parsed by
// JSON.parse; an arithmetic grammar's outputs parsed by a parser written here;
// chat.completions.parse with a zod schema through the openai client; and
// unsupported keywords refused with a 400 naming them. Constrained and free
// requests run at the same time, so batched decode mixes them.
import Ajv2020 from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { zodResponseFormat } from 'openai/helpers/zod';
import { z } from 'zod';
import { readdirSync, readFileSync } from 'node:fs';
import { jsonObjectPrefix } from './json_prefix.mjs';
import { client, check, checkEq, test, report, raw, MODEL } from '../server/lib.mjs';

const ajv = new Ajv2020({ strict: false, allErrors: true });
addFormats(ajv);

// The schemas live in schemas/*.json, where tools/inferno-grambench reads them too.
const SCHEMA_DIR = new URL('./schemas/', import.meta.url);
const SCHEMAS = Object.fromEntries(readdirSync(SCHEMA_DIR).filter((f) => f.endsWith('.json')).sort()
  .map((f) => [f.replace(/\.json$/, ''), JSON.parse(readFileSync(new URL(f, SCHEMA_DIR), 'utf8'))]));

const SEEDS = [1, 2, 3];
const post = (path, obj) => raw(path, { method: 'POST', body: JSON.stringify(obj) });
const chat = (extra) =>
  client.chat.completions.create({
    model: MODEL,
    messages: [{ role: 'user', content: 'Reply in JSON.' }],
    temperature: 1.0,
    max_tokens: 1500,
    ...extra,
  });

await test('json_schema outputs validate (ajv), temperature 1.0', async () => {
  const jobs = [];
  let schemaEnded = 0, schemaCut = 0;
  for (const [name, schema] of Object.entries(SCHEMAS)) {
    const validate = ajv.compile(schema);
    for (const seed of SEEDS) {
      jobs.push(chat({
        seed,
        response_format: { type: 'json_schema', json_schema: { name, schema, strict: seed !== 2 } },
      }).then((r) => {
        const text = r.choices[0].message.content;
        const fin = r.choices[0].finish_reason;
        // The random model may stay inside an unbounded string until
        // max_tokens: such a reply must say "length" and be a JSON object's
        // prefix; most replies must be ended by the grammar (counted below).
        if (fin !== 'stop') {
          schemaCut++;
          checkEq(fin, 'length', `${name} seed ${seed}: finish_reason of a cut reply`);
          const p = jsonObjectPrefix(text);
          return check(p.ok && !p.complete, `${name} seed ${seed}: a cut reply is a prefix of an object`,
                       `${p.why} in ${JSON.stringify(text)}`);
        }
        schemaEnded++;
        let doc;
        try { doc = JSON.parse(text); } catch (e) {
          return check(false, `${name} seed ${seed}: parses`, JSON.stringify(text));
        }
        check(validate(doc), `${name} seed ${seed}: valid`,
              `${JSON.stringify(validate.errors)} in ${JSON.stringify(text)}`);
      }));
    }
  }
  // a free request beside them: the same batch holds constrained and free rows
  jobs.push(chat({ seed: 9, max_tokens: 64 }).then((r) =>
    check(r.choices[0].message.content.length > 0, 'free request beside constrained ones')));
  await Promise.all(jobs);
  // How many replies close their strings is chance: the sampled tokens follow
  // the logits' last bits, which differ by ISA level (3 of 4 ended on AVX2 and
  // AMX hosts, 15 of 21 on Zen 4's AVX-512). A grammar that kept replies from
  // ending would leave few or none ended.
  check(schemaEnded > schemaCut, 'json_schema: most replies ended by the grammar',
        `${schemaEnded} ended, ${schemaCut} cut`);
});

await test("llama.cpp's json_schema field, thinking off", async () => {
  // as above, the random model may stay in a string until max_tokens: a cut
  // reply must be an object's prefix, and at least one of the seeds must end
  const validate = ajv.compile(SCHEMAS.person);
  let ended = 0;
  for (const seed of [5, 6, 7, 8]) {
    const r = await chat({ seed, json_schema: SCHEMAS.person,
                           chat_template_kwargs: { enable_thinking: false } });
    const text = r.choices[0].message.content;
    if (r.choices[0].finish_reason !== 'stop') {
      checkEq(r.choices[0].finish_reason, 'length', `json_schema field seed ${seed}: finish_reason of a cut reply`);
      const p = jsonObjectPrefix(text);
      check(p.ok && !p.complete, `json_schema field seed ${seed}: a cut reply is a prefix of an object`,
            `${p.why} in ${JSON.stringify(text)}`);
      continue;
    }
    ended++;
    let doc;
    try { doc = JSON.parse(text); } catch (e) {
      check(false, `json_schema field seed ${seed}: parses`, JSON.stringify(text));
      continue;
    }
    check(validate(doc), `json_schema field seed ${seed}: valid`, text);
  }
  check(ended >= 1, 'json_schema field: at least one of 4 replies ended by the grammar', `${ended} ended`);
});

await test('the JSON prefix checker of this test refuses what it should', async () => {
  for (const t of ['{', '{"a": [1, -', '{"k": "x\\u00', '{"a":tr', '{"a":1e+', '{"a":[{"b":[]},', '{"a" ']) {
    const r = jsonObjectPrefix(t);
    let doc = null;
    try { doc = JSON.parse(t + r.completion); } catch { /* checked below */ }
    check(r.ok && doc && typeof doc === 'object', `prefix ${JSON.stringify(t)} completes`, JSON.stringify(r));
  }
  for (const t of ['[1', '{"a" 1', '{"a":01', '{"a":"\u0001', '{"a":1}}', '{,', '{"a":1.e', '{"a":[1}', '{"a":"\\x']) {
    check(!jsonObjectPrefix(t).ok, `not a prefix: ${JSON.stringify(t)}`);
  }
});

await test('json_object outputs are JSON objects, or prefixes of one when cut', async () => {
  // The random model's strings rarely close (a quote is a small part of the
  // vocabulary), so a reply may run out of tokens inside one: a reply the
  // grammar ended must parse as an object; one cut by max_tokens must say
  // "length" and be an object's prefix (json_prefix.mjs, completed and parsed).
  let ended = 0, cut = 0;
  await Promise.all([11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22].map(async (seed) => {
    const r = await chat({ seed, max_tokens: seed % 2 ? 1500 : 40, response_format: { type: 'json_object' } });
    const text = r.choices[0].message.content;
    const fin = r.choices[0].finish_reason;
    if (fin !== 'stop') {
      cut++;
      checkEq(fin, 'length', `json_object seed ${seed}: finish_reason of a cut reply`);
      const p = jsonObjectPrefix(text);
      check(p.ok && !p.complete, `json_object seed ${seed}: a prefix of an object`, `${p.why} in ${JSON.stringify(text)}`);
      let doc = null;
      try { doc = JSON.parse(text + (p.completion ?? '')); } catch { /* below */ }
      check(doc !== null && typeof doc === 'object' && !Array.isArray(doc),
            `json_object seed ${seed}: completed, it parses as an object`, JSON.stringify(text + p.completion));
      return;
    }
    ended++;
    let doc;
    try { doc = JSON.parse(text); } catch {
      return check(false, `json_object seed ${seed}: parses`, JSON.stringify(text));
    }
    check(doc !== null && typeof doc === 'object' && !Array.isArray(doc),
          `json_object seed ${seed}: an object`, text);
    check(jsonObjectPrefix(text).complete, `json_object seed ${seed}: the prefix checker agrees`, text);
  }));
  // Whether any reply closes its object within max_tokens is chance on random
  // weights (a run of several thousand characters inside one string is
  // common), so ended replies are checked when they occur, not required;
  // the json_schema replies above are the ones required to end.
  console.log(`  json_object: ${ended} of 12 ended by the grammar, ${cut} cut`);
  check(cut >= 1, 'json_object: at least one reply cut by max_tokens', `${cut} of 12`);
});

// The arithmetic language, and a parser for it that shares nothing with inferno.
const ARITH = `root ::= expr
expr ::= term (("+" | "-") term)*
term ::= factor (("*" | "/") factor)*
factor ::= num | "(" expr ")" | "-" factor
num ::= [0-9] | [1-9] [0-9]{1,3}
`;
function parseArith(s) {
  let i = 0;
  const num = () => {
    const m = /^(0|[1-9][0-9]{1,3}|[1-9])/.exec(s.slice(i));
    if (!m) throw new Error(`number expected at ${i}`);
    i += m[0].length;
  };
  const factor = (d) => {
    if (d > 2000) throw new Error('too deep');
    if (s[i] === '(') { i++; expr(d + 1); if (s[i++] !== ')') throw new Error(`')' expected at ${i - 1}`); }
    else if (s[i] === '-') { i++; factor(d + 1); }
    else num();
  };
  const term = (d) => { factor(d); while (s[i] === '*' || s[i] === '/') { i++; factor(d); } };
  const expr = (d) => { term(d); while (s[i] === '+' || s[i] === '-') { i++; term(d); } };
  expr(0);
  if (i !== s.length) throw new Error(`trailing text at ${i}`);
}
await test('arithmetic grammar: only sentences (a separate parser)', async () => {
  check((() => { try { parseArith('1+(2*3)-4'); parseArith('(1'); return false; } catch { return true; } })(),
        'the test parser refuses a non-sentence');
  await Promise.all([21, 22, 23, 24, 25].map(async (seed) => {
    const r = await post('/v1/completions', {
      model: MODEL, prompt: 'Compute:', temperature: 1.0, seed, max_tokens: 60, grammar: ARITH });
    const j = r.json ?? {};
    const text = j.choices?.[0]?.text ?? '';
    const fin = j.choices?.[0]?.finish_reason;
    // cut at max_tokens the text is a prefix of a sentence; whole ones must parse
    if (fin === 'stop') {
      try { parseArith(text); check(true, ''); }
      catch (e) { check(false, `arith seed ${seed}: a sentence`, `${e.message}: ${JSON.stringify(text)}`); }
    } else {
      check(/^[-+*/()0-9]*$/.test(text), `arith seed ${seed}: only its alphabet`, JSON.stringify(text));
    }
  }));
  // ended by the grammar: a language of finite sentences
  const r = await post('/v1/completions', {
    model: MODEL, prompt: 'x', temperature: 1.0, seed: 4, max_tokens: 200,
    grammar: 'root ::= "(" [1-9] ("+" [1-9]){0,3} ")"' });
  const j = r.json ?? {};
  checkEq(j.choices?.[0]?.finish_reason, 'stop', 'finite grammar ends with stop');
  check(/^\([1-9](\+[1-9]){0,3}\)$/.test(j.choices?.[0]?.text ?? ''), 'finite grammar: a sentence',
        JSON.stringify(j.choices?.[0]?.text));
});

await test('chat.completions.parse with a zod schema', async () => {
  const Item = z.object({ name: z.string().max(10), done: z.boolean(), tags: z.array(z.enum(['a', 'b'])).max(2) });
  const r = await client.chat.completions.parse({
    model: MODEL, messages: [{ role: 'user', content: 'A todo item.' }], temperature: 1.0, seed: 31,
    max_tokens: 400, response_format: zodResponseFormat(Item, 'item'),
  });
  const parsed = r.choices[0].message.parsed;
  check(parsed && typeof parsed.name === 'string' && typeof parsed.done === 'boolean',
        'parsed object', JSON.stringify(r.choices[0].message));
});

await test('unsupported keywords: 400 naming them', async () => {
  for (const [schema, word] of [
    [{ type: 'string', not: { const: 'x' } }, "'not'"],
    [{ type: 'object', patternProperties: { '^a': {} } }, "'patternProperties'"],
    [{ type: 'string', format: 'email' }, "'email'"],
  ]) {
    const r = await post('/v1/chat/completions', {
      model: MODEL, messages: [{ role: 'user', content: 'x' }],
      response_format: { type: 'json_schema', json_schema: { name: 'x', schema } } });
    checkEq(r.status, 400, `${word}: status`);
    const j = r.json ?? {};
    check(j.error?.message?.includes(word), `${word}: named`, j.error?.message);
  }
});

process.exit(report('grammar'));
