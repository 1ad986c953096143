// Do GGUF files (those `inferno quantize` writes) load and run in llama.cpp, and does llama.cpp
// compute what inferno computes on them? Through node-llama-cpp's prebuilt binaries. Not part of
// CI (docs/QUANTIZE.md has the commands and the results).
// Set-up, outside the repository (about 640 MB of prebuilt binaries):
//   mkdir /tmp/llamacpp && cd /tmp/llamacpp && npm init -y && npm install node-llama-cpp@3.22.1
//   cp /path/to/inferno/tools/llamacpp-check.mjs check.mjs
// usage: node check.mjs [--tokens 785,3974,...] [-n 32] [--top 5] [--threads 2]
//                       [--inferno /path/to/build/inferno] [--backend pool] [--md] [-v] FILE.gguf...
// For each file: llama.cpp loads it (a refusal is reported with llama.cpp's own last log lines),
// prefills the token ids (no BOS added: the ids are fed as given), then decodes -n steps greedily;
// it prints the greedy token ids and the top logits of every step.
// With --inferno: `inferno run --token-ids ... --temp 0 --dump-logits` on the same file and the
// same ids, and the comparison: greedy ids one for one; the first step where they differ and the
// logit gap there in each engine (llama.cpp's logit of its token minus that of inferno's token,
// and the reverse in inferno: a gap near zero is a near-tie, not a disagreement); the largest
// |logit difference| at the first step and over all steps before the first divergence (where
// both ran on the same history), each relative to the range (max - min) of llama.cpp's logits
// at that step; whether the top-k ids agree as sets at the first step. K/V are f16 in both
// (each engine's default). --md prints one markdown table row per file at the end.
// Exit status: 0 when every file loaded in llama.cpp (and inferno ran it), 1 otherwise.
//
// Uses node-llama-cpp's lowest-level binding (AddonContext: initBatch / addToBatch /
// decodeBatch, sampleToken with a greedy AddonSampler that returns the full logit vector).
import {execFileSync} from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import {getLlama, LlamaLogLevel} from "node-llama-cpp";

// "The quick brown fox jumps over the lazy dog. Once upon a time, in a small village by the
// river," in Qwen3's tokenizer (`inferno tokenize`)
const DEFAULT_TOKENS = "785,3974,13876,38835,34208,916,279,15678,5562,13,9646,5193,264,882,11,304,264,2613,14126,553,279,14796,11";

function usage(msg) {
    if (msg) console.error("error: " + msg);
    console.error("usage: node check.mjs [--tokens ID,ID,...] [-n 32] [--top 5] [--threads 2] [--inferno PATH] [--backend pool|simd|scalar] [--md] [-v] FILE.gguf...");
    process.exit(msg ? 2 : 0);
}

const args = process.argv.slice(2);
const opt = {files: [], tokens: DEFAULT_TOKENS, n: 32, top: 5, threads: 2, inferno: null, backend: "pool", md: false, verbose: false};
for (let i = 0; i < args.length; i++) {
    const a = args[i];
    const num = (min) => {
        const v = Number(args[++i]);
        if (!Number.isInteger(v) || v < min) usage(`bad value for ${a} (expected an integer >= ${min})`);
        return v;
    };
    if (a === "--tokens") opt.tokens = String(args[++i] ?? "");
    else if (a === "-n" || a === "--n-predict") opt.n = num(1);
    else if (a === "--top") opt.top = num(1);
    else if (a === "--threads" || a === "-t") opt.threads = num(1);
    else if (a === "--inferno") { opt.inferno = args[++i]; if (!opt.inferno) usage("--inferno needs a path"); }
    else if (a === "--backend") { opt.backend = args[++i]; if (!opt.backend) usage("--backend needs a name"); }
    else if (a === "--md") opt.md = true;
    else if (a === "-v" || a === "--verbose") opt.verbose = true;
    else if (a === "-h" || a === "--help") usage();
    else if (a.startsWith("-")) usage(`unknown option ${a}`);
    else opt.files.push(a);
}
if (!opt.files.length) usage("no GGUF file given");
const prompt = opt.tokens.split(",").map(Number);
if (!prompt.length || prompt.some((t) => !Number.isInteger(t) || t < 0)) usage(`--tokens: expected comma-separated token ids, got '${opt.tokens}'`);

const logLines = [];
const llama = await getLlama({
    gpu: false,                 // CPU-only build (@node-llama-cpp/linux-x64)
    build: "never",             // never try to compile llama.cpp
    usePrebuiltBinaries: true,
    skipDownload: true,
    progressLogs: false,
    maxThreads: 0,              // the context's `threads` is used as-is
    logLevel: opt.verbose ? LlamaLogLevel.debug : LlamaLogLevel.info,
    logger(level, message) {
        logLines.push(message.endsWith("\n") ? message : message + "\n");
        if (opt.verbose) process.stderr.write(`[${level}] ${message}${message.endsWith("\n") ? "" : "\n"}`);
    }
});
console.log(`node-llama-cpp llama.cpp=${llama.llamaCppRelease?.release ?? "?"} ${llama.systemInfo}`);
console.log(`prompt: ${prompt.length} token ids, then ${opt.n} greedy steps`);

// llama.cpp: the greedy ids and, per step, a Map id -> logit: the whole vocabulary at step 0;
// later the top ids and those of `want` (inferno's ids, when known): turning all 152k logits
// into JS values every step would cost more than the decode itself
async function runLlama(file, want) {
    const model = await llama.loadModel({modelPath: file, gpuLayers: 0, useMmap: true});
    const context = await model.createContext({
        contextSize: Math.max(256, prompt.length + opt.n + 1),
        batchSize: Math.max(prompt.length, 1),
        sequences: 1,
        threads: opt.threads
    });
    const ctx = context._ctx;                       // AddonContext (native)
    const seqId = context.getSequence()._sequenceId;
    const sampler = new llama._bindings.AddonSampler(model._model);
    sampler.applyConfig({temperature: 0});           // greedy: the chain is llama_sampler_init_greedy alone
    const tokens = [], logits = [];
    let batch = Uint32Array.from(prompt), pos = 0, nVocab = 0;
    for (let step = 0; step < opt.n; step++) {
        ctx.initBatch(batch.length);
        const [li] = ctx.addToBatch(seqId, pos, batch, Uint32Array.of(batch.length - 1));
        await ctx.decodeBatch();
        pos += batch.length;
        // logits: true = all of them; [ids, max, min, selected, top k] = those ids, the chosen one
        // and the top k; the answer is [token, probabilities, confidence, (id, logit) pairs, weight]
        const filter = step === 0 ? true : [want ? [want[step]] : [], false, false, true, opt.top];
        const [tok, , , pairs] = await ctx.sampleToken(li, sampler, false, false, filter);
        const row = new Map();
        for (let i = 0; i < pairs.length; i += 2) row.set(pairs[i], pairs[i + 1]);
        if (step === 0) nVocab = row.size;
        tokens.push(tok);
        logits.push(row);
        batch = Uint32Array.of(tok);
    }
    sampler.dispose();
    await context.dispose();
    await model.dispose();
    return {tokens, logits, nVocab};
}

// a float32 .npy of shape [steps, vocab], as `inferno run --dump-logits` writes it
function readNpy(file) {
    const buf = fs.readFileSync(file);
    if (buf.toString("latin1", 1, 6) !== "NUMPY") throw new Error(`${file}: not a .npy file`);
    const hlen = buf.readUInt16LE(8), header = buf.toString("latin1", 10, 10 + hlen);
    const shape = header.match(/'shape':\s*\((\d+),\s*(\d+)\)/);
    if (!header.includes("'<f4'") || !shape) throw new Error(`${file}: expected float32 [steps, vocab], header ${header.trim()}`);
    const [steps, vocab] = [Number(shape[1]), Number(shape[2])];
    const data = new Float32Array(buf.buffer.slice(buf.byteOffset + 10 + hlen, buf.byteOffset + 10 + hlen + steps * vocab * 4));
    return Array.from({length: steps}, (_, s) => data.subarray(s * vocab, (s + 1) * vocab));
}

function runInferno(file) {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "llamacpp-check-"));
    const npy = path.join(dir, "logits.npy");
    try {
        execFileSync(opt.inferno, ["run", "-m", file, "--token-ids", prompt.join(","), "-n", String(opt.n),
            "--temp", "0", "--ignore-eos", "--backend", opt.backend, "-t", String(opt.threads), "-c", "256", "--dump-logits", npy],
        {stdio: ["ignore", "ignore", "pipe"]});
        const logits = readNpy(npy);
        return {tokens: logits.map(argmax), logits};
    } finally {
        fs.rmSync(dir, {recursive: true, force: true});
    }
}

function argmax(row) {
    let best = 0;
    for (let i = 1; i < row.length; i++) if (row[i] > row[best]) best = i;
    return best;
}
// the top k ids of a Float32Array or of a Map id -> logit
function topk(row, k) {
    const ids = row instanceof Map ? [...row.keys()] : Array.from(row.keys());
    const at = (t) => (row instanceof Map ? row.get(t) : row[t]);
    return ids.sort((a, b) => at(b) - at(a) || a - b).slice(0, k);
}
function range(row) {
    let lo = Infinity, hi = -Infinity;
    for (const v of row.values()) { lo = Math.min(lo, v); hi = Math.max(hi, v); }
    return hi - lo;
}
// the largest |llama.cpp - inferno| over the ids llama.cpp's Map holds
function maxDiff(lrow, irow) {
    let m = 0;
    for (const [t, v] of lrow) m = Math.max(m, Math.abs(v - irow[t]));
    return m;
}
const fmtTop = (row, k) => topk(row, k).map((t) => `${t}:${(row instanceof Map ? row.get(t) : row[t]).toFixed(3)}`).join(" ");

const rows = [];
let failed = 0;
for (const file of opt.files) {
    const name = path.basename(file);
    console.log(`\n== ${file}`);
    let I = null;
    if (opt.inferno) {
        try {
            I = runInferno(file);
        } catch (e) {
            failed++;
            console.log(`inferno failed: ${String(e.stderr ?? e.message).trim()}`);
        }
    }
    const start = logLines.length;
    let L;
    try {
        L = await runLlama(file, I && I.tokens);
    } catch (e) {
        failed++;
        const tail = logLines.slice(start).filter((l) => /error|fail|invalid|unknown|expected/i.test(l)).slice(-4).join("").trim();
        console.log(`llama.cpp REFUSED it: ${e.message}${tail ? "\n" + tail : ""}`);
        rows.push(`| ${name} | **refused**: ${e.message.replace(/\|/g, "/")} | | | | | |`);
        continue;
    }
    const ftype = logLines.slice(start).join("").match(/file type\s*=\s*([^\n]+)/);
    console.log(`llama.cpp loaded it${ftype ? ` (file type ${ftype[1].trim()})` : ""}`);
    console.log(`llama.cpp greedy: ${L.tokens.join(",")}`);
    for (let s = 0; s < L.logits.length; s++)
        if (opt.verbose || s === 0) console.log(`  step ${s} top-${opt.top}: ${fmtTop(L.logits[s], opt.top)}`);
    if (!I) {
        rows.push(`| ${name} | loads | ${opt.inferno ? "inferno failed" : ""} | | | | |`);
        continue;
    }
    console.log(`inferno greedy:   ${I.tokens.join(",")}`);
    console.log(`  step 0 top-${opt.top}: ${fmtTop(I.logits[0], opt.top)}`);
    if (I.logits[0].length !== L.nVocab) {
        failed++;
        console.log(`vocabulary sizes differ: llama.cpp ${L.nVocab}, inferno ${I.logits[0].length}`);
        rows.push(`| ${name} | loads | n_vocab ${L.nVocab} vs ${I.logits[0].length} | | | | |`);
        continue;
    }
    let div = L.tokens.findIndex((t, s) => t !== I.tokens[s]);
    // a divergence that is no near-tie in llama.cpp: run llama.cpp again, up to twice (under
    // heavy CPU load a run now and then gave other logits after ~20 steps than the next run of
    // the same file, the same ids and the same process); the run that agrees longest is kept and
    // the row is marked "llama.cpp runs differ"
    let unstable = false;
    for (let r = 0; r < 2 && div >= 0 && L.logits[div].get(L.tokens[div]) - L.logits[div].get(I.tokens[div]) > 0.5; r++) {
        const again = await runLlama(file, I.tokens);
        const same = again.tokens.every((t, s) => t === L.tokens[s]);
        console.log(`llama.cpp rerun (the divergence at step ${div} is no near-tie): ${same ? "the same ids" : "OTHER ids: " + again.tokens.join(",")}`);
        if (same) break;
        unstable = true;
        const d2 = again.tokens.findIndex((t, s) => t !== I.tokens[s]);
        if (d2 < 0 || d2 > div) [L, div] = [again, d2];
    }
    const agree = div < 0 ? L.tokens.length : div;
    // up to and including the first divergence both engines' logits are of the same history
    const last = div < 0 ? L.tokens.length - 1 : div;
    const d0 = maxDiff(L.logits[0], I.logits[0]), r0 = range(L.logits[0]);
    let dTop = 0;
    for (let s = 0; s <= last; s++)
        for (const t of topk(L.logits[s], opt.top)) dTop = Math.max(dTop, Math.abs(L.logits[s].get(t) - I.logits[s][t]));
    const topSame = (() => {
        const a = new Set(topk(L.logits[0], opt.top));
        return topk(I.logits[0], opt.top).every((t) => a.has(t));
    })();
    let divText = "none", divCell = "none";
    if (div >= 0) {
        const a = L.tokens[div], b = I.tokens[div];
        const gl = L.logits[div].get(a) - L.logits[div].get(b), gi = I.logits[div][b] - I.logits[div][a];
        divText = `step ${div}: llama.cpp ${a}, inferno ${b}; gap ${gl.toFixed(4)} (llama.cpp), ${gi.toFixed(4)} (inferno)`;
        divCell = `step ${div}: gap ${gl.toFixed(3)} / ${gi.toFixed(3)}`;
    }
    console.log(`greedy ids agree: ${agree}/${L.tokens.length}; first divergence: ${divText}`);
    console.log(`max |logit diff| at step 0: ${d0.toExponential(3)} = ${(d0 / r0 * 100).toFixed(4)}% of the range ${r0.toFixed(3)}; ` +
        `over the top-${opt.top} ids of steps 0..${last}: ${dTop.toExponential(3)}; top-${opt.top} ids at step 0 ${topSame ? "the same" : "DIFFER"}`);
    rows.push(`| ${name} | loads${unstable ? " (llama.cpp runs differ)" : ""} | ${agree}/${L.tokens.length} | ${divCell} | ${(d0 / r0 * 100).toFixed(3)} % (${d0.toFixed(3)} of ${r0.toFixed(1)}) | ${dTop.toFixed(3)} | ${topSame ? "same" : "differ"} |`);
}
if (opt.md) {
    console.log(`\n| file | llama.cpp | greedy ids equal | first divergence: logit gap llama.cpp / inferno | step 0: max abs Δlogit, of the range | max abs Δ of top-${opt.top} logits before divergence | top-${opt.top} ids at step 0 |`);
    console.log("| --- | --- | ---: | --- | ---: | ---: | --- |");
    for (const r of rows) console.log(r);
}
await llama.dispose();
process.exit(failed ? 1 : 0);
