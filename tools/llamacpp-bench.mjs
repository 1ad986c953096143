// llama-bench-like CPU benchmark of llama.cpp through node-llama-cpp's prebuilt binaries,
// for side-by-side runs against `inferno bench` (docs/PERFORMANCE.md). Not part of CI.
// Set-up, outside the repository (about 640 MB of prebuilt binaries):
//   mkdir /tmp/llamacpp && cd /tmp/llamacpp && npm init -y && npm install node-llama-cpp@3.22.1
//   cp /path/to/inferno/tools/llamacpp-bench.mjs bench.mjs
// usage: node bench.mjs MODEL.gguf [--threads 2] [-p 512] [-n 128] [-d 0,2048] [-r 3] [-ub 512] [-fa 1] [--no-warmup] [-v]
// -d (llama-bench's --n-depth, a comma list): before each timed pp/tg run the context first holds
// that many random tokens (prefilled, untimed), as llama-bench -d does. The K/V cache is
// llama.cpp's default (f16).
//
// Uses node-llama-cpp's lowest-level binding (AddonContext: initBatch / addToBatch / decodeBatch),
// i.e. one llama_decode() per call, with token ids chosen at random as llama-bench does.
// No sampling is done, and only the last token of each batch requests logits (like llama_batch_get_one).
import fs from "node:fs";
import {getLlama, LlamaLogLevel} from "node-llama-cpp";

function usage(msg) {
    if (msg) console.error("error: " + msg);
    console.error("usage: node bench.mjs MODEL.gguf [--threads 2] [-p 512] [-n 128] [-d 0[,D...]] [-r 3] [-ub 512] [-fa 1|0] [--no-warmup] [-v]");
    process.exit(1);
}

const args = process.argv.slice(2);
const opt = {model: null, threads: 2, p: 512, n: 128, d: [0], r: 3, ub: 512, fa: true, warmup: true, verbose: false};
for (let i = 0; i < args.length; i++) {
    const a = args[i];
    const num = () => {
        const v = Number(args[++i]);
        if (!Number.isInteger(v) || v < 0) usage(`bad value for ${a}`);
        return v;
    };
    if (a === "--threads" || a === "-t") opt.threads = num();
    else if (a === "-p" || a === "--n-prompt") opt.p = num();
    else if (a === "-n" || a === "--n-gen") opt.n = num();
    else if (a === "-r" || a === "--repetitions") opt.r = num();
    else if (a === "-d" || a === "--n-depth") {
        opt.d = String(args[++i] ?? "").split(",").map(Number);
        if (!opt.d.length || opt.d.some((v) => !Number.isInteger(v) || v < 0)) usage(`bad value for ${a}`);
    }
    else if (a === "-ub" || a === "--ubatch-size") opt.ub = num();
    else if (a === "-fa" || a === "--flash-attn") opt.fa = num() !== 0;
    else if (a === "--no-warmup") opt.warmup = false;
    else if (a === "-v" || a === "--verbose") opt.verbose = true;
    else if (a === "-h" || a === "--help") usage();
    else if (a.startsWith("-")) usage(`unknown option ${a}`);
    else if (opt.model == null) opt.model = a;
    else usage(`unexpected argument ${a}`);
}
if (opt.model == null) usage("no model given");
if (opt.threads < 1 || opt.r < 1 || opt.ub < 1) usage("threads, -r and -ub must be >= 1");

// capture llama.cpp log lines (used to report the CPU variant and FA status, and to read perf timings)
const logLines = [];
const llama = await getLlama({
    gpu: false,                 // CPU-only build (@node-llama-cpp/linux-x64)
    build: "never",             // never try to compile llama.cpp
    usePrebuiltBinaries: true,
    skipDownload: true,
    progressLogs: false,
    maxThreads: 0,              // 0 = no global thread budget: the context's `threads` is used as-is
    // info (not debug): debug logging prints per-decode graph details and slows decoding down massively
    logLevel: opt.verbose ? LlamaLogLevel.debug : LlamaLogLevel.info,
    logger(level, message) {
        logLines.push(message.endsWith("\n") ? message : message + "\n");
        if (opt.verbose) process.stderr.write(`[${level}] ${message}${message.endsWith("\n") ? "" : "\n"}`);
    }
});

const model = await llama.loadModel({modelPath: opt.model, gpuLayers: 0, useMmap: true});

// batch == ubatch in node-llama-cpp (it sets n_ubatch = n_batch); the prompt is fed in chunks of `ub` tokens,
// which is what llama-bench does internally with its default n_ubatch=512.
const maxDepth = Math.max(...opt.d);
const batchSize = Math.max(1, Math.min(Math.max(opt.p, maxDepth) || 1, opt.ub));
const contextSize = Math.max(maxDepth + opt.p + opt.n, 256) + 1;
const context = await model.createContext({
    contextSize,
    batchSize,
    sequences: 1,
    threads: opt.threads,
    flashAttention: opt.fa,
    performanceTracking: true
});
const sequence = context.getSequence();
const ctx = context._ctx;                 // AddonContext (native)
const seqId = sequence._sequenceId;

// vocabulary size (llama-bench picks random ids in [0, n_vocab))
let nVocab = model.fileInfo?.metadata?.tokenizer?.ggml?.tokens?.length;
if (!Number.isInteger(nVocab) || nVocab <= 0) {
    const m = logLines.join("").match(/n_vocab\s*=\s*(\d+)/);
    nVocab = m ? Number(m[1]) : undefined;
}
if (!Number.isInteger(nVocab) || nVocab <= 0) throw new Error("could not determine vocabulary size");
const bos = model.tokens.bos;
const addBos = model.tokens.shouldPrependBosToken && bos != null;

// deterministic PRNG for token ids
let seed = 1234;
const rand = () => { seed = (seed * 1103515245 + 12345) >>> 0; return (seed >>> 1); };
const randTok = () => rand() % nVocab;

const noLogits = new Uint32Array(0);

async function decode(tokens, pos, wantLastLogit) {
    ctx.initBatch(tokens.length);
    ctx.addToBatch(seqId, pos, tokens, wantLastLogit ? Uint32Array.of(tokens.length - 1) : noLogits);
    await ctx.decodeBatch();               // llama_decode + llama_synchronize on a libuv worker thread
}

function clearMemory() {
    ctx.disposeSequence(seqId);            // llama_memory_seq_rm(seq, -1, -1)
}

// nPrompt random tokens at positions start.. (BOS first when start is 0)
async function runPrompt(nPrompt, start = 0) {
    const toks = new Uint32Array(nPrompt);
    for (let i = 0; i < nPrompt; i++) toks[i] = randTok();
    if (addBos && start === 0) toks[0] = bos;
    let pos = 0;
    while (pos < nPrompt) {
        const len = Math.min(batchSize, nPrompt - pos);
        await decode(toks.subarray(pos, pos + len), start + pos, pos + len === nPrompt);
        pos += len;
    }
}

async function runGen(nGen, start = 0) {
    let tok = addBos && start === 0 ? bos : randTok();
    const one = new Uint32Array(1);
    for (let i = 0; i < nGen; i++) {
        one[0] = tok;
        await decode(one, start + i, true);
        tok = randTok();
    }
}

// an empty context, then `depth` tokens in it (untimed)
async function fillDepth(depth) {
    clearMemory();
    if (depth > 0) await runPrompt(depth);
}

// parse llama_perf_context_print output (printed via the logger) to get llama.cpp's own eval time
async function takePerf() {
    const start = logLines.length;
    ctx.printTimings();                    // prints and resets llama_perf_context
    await new Promise(res => setTimeout(res, 100));   // native log lines reach JS asynchronously
    const text = logLines.slice(start).join("");
    const pe = text.match(/prompt eval time\s*=\s*([\d.]+) ms\s*\/\s*(\d+) tokens/);
    const ev = text.match(/\beval time\s*=\s*([\d.]+) ms\s*\/\s*(\d+) runs/);
    return {
        promptMs: pe ? Number(pe[1]) : NaN, promptTokens: pe ? Number(pe[2]) : 0,
        evalMs: ev ? Number(ev[1]) : NaN, evalRuns: ev ? Number(ev[2]) : 0
    };
}

function stats(xs) {
    const mean = xs.reduce((a, b) => a + b, 0) / xs.length;
    const sd = xs.length > 1 ? Math.sqrt(xs.reduce((a, b) => a + (b - mean) ** 2, 0) / (xs.length - 1)) : 0;
    return {mean, sd};
}

const log = logLines.join("");
// which ggml CPU variant (GGML_CPU_ALL_VARIANTS) was dlopen()ed
const variant = [...new Set(fs.readFileSync("/proc/self/maps", "utf8").split("\n")
    .map(l => l.match(/libggml-cpu-([a-z0-9_]+)\.so/)).filter(Boolean).map(m => m[1]))];
const faLine = log.match(/flash_attn\s*=\s*([^\n]+)/);
const amx = (log.match(/[^\n]*AMX model buffer size[^\n]*/g) || []).slice(0, 1);
console.log(`model: ${opt.model}`);
console.log(`node-llama-cpp ${JSON.stringify(llama.buildType)} gpu=${llama.gpu} llama.cpp=${llama.llamaCppRelease?.release ?? "?"}`);
console.log(`cpu backend variant: ${variant.length ? variant.join(",") : "?"}`);
console.log(`AMX weight buffer: ${amx.length ? amx[0].trim() : "not used (no AMX-repacked weights)"}`);
console.log(`system info: ${llama.systemInfo}`);
console.log(`threads=${ctx.getThreads()} n_ctx=${ctx.getContextSize()} n_batch=n_ubatch=${batchSize} flash_attn requested=${opt.fa} llama.cpp: ${faLine ? faLine[1].trim() : "?"} n_vocab=${nVocab} add_bos=${addBos}`);

const results = [];
for (const depth of opt.p > 0 ? opt.d : []) {
    const at = depth > 0 ? ` @ d${depth}` : "";
    if (opt.warmup) { await fillDepth(depth); await runPrompt(opt.p, depth); }
    await takePerf();
    const tps = [];
    for (let r = 0; r < opt.r; r++) {
        await fillDepth(depth);
        const t0 = process.hrtime.bigint();
        await runPrompt(opt.p, depth);
        const s = Number(process.hrtime.bigint() - t0) / 1e9;
        tps.push(opt.p / s);
    }
    const perf = await takePerf();
    const {mean, sd} = stats(tps);
    results.push(`pp${opt.p}${at} ${mean.toFixed(2)} ± ${sd.toFixed(2)} t/s`);
    if (perf.promptTokens === opt.p * opt.r && perf.promptMs > 0)
        console.log(`  (pp: llama.cpp internal prompt eval ${(perf.promptTokens / perf.promptMs * 1000).toFixed(2)} t/s over ${perf.promptTokens} tokens)`);
}
for (const depth of opt.n > 0 ? opt.d : []) {
    const at = depth > 0 ? ` @ d${depth}` : "";
    if (opt.warmup) { await fillDepth(depth); await runGen(1, depth); }
    await takePerf();
    const tps = [];
    let wallS = 0;
    for (let r = 0; r < opt.r; r++) {
        await fillDepth(depth);
        const t0 = process.hrtime.bigint();
        await runGen(opt.n, depth);
        const s = Number(process.hrtime.bigint() - t0) / 1e9;
        wallS += s;
        tps.push(opt.n / s);
    }
    const perf = await takePerf();
    const {mean, sd} = stats(tps);
    results.push(`tg${opt.n}${at} ${mean.toFixed(2)} ± ${sd.toFixed(2)} t/s`);
    // single-token decodes are accounted as "eval" by llama_perf_context (measured inside llama_decode)
    if (perf.evalRuns === opt.n * opt.r && perf.evalMs > 0) {
        const ovUs = (wallS * 1000 - perf.evalMs) / perf.evalRuns * 1000;
        console.log(`  (tg: llama.cpp internal ${(perf.evalRuns / perf.evalMs * 1000).toFixed(2)} t/s; JS/binding overhead ≈ ${ovUs.toFixed(1)} µs/token)`);
    }
}
for (const line of results) console.log(line);

await context.dispose();
await model.dispose();
await llama.dispose();
