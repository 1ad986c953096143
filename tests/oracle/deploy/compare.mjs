// The prefix-cache hit rate of two runs of load.mjs over the same requests:
// the (client, conversation, turn) triples both completed — the first run's
// within its window (every replica up), the second's anywhere — so that
// both sides sum the same prompts and only the routing differs.
//
//   node compare.mjs HASH.json ROUNDROBIN.json MARGIN PREFILL_RATIO
//
// Prints both hit rates, their ratio and the prefilled (uncached) tokens of
// each; exits 1 unless the first's hit rate is at least MARGIN points above
// the second's and the second prefilled at least PREFILL_RATIO times as many
// tokens (docs/PERFORMANCE.md, "Replicas behind HAProxy", for the values).
import { readFileSync } from 'node:fs';

const [aPath, bPath, marginArg, ratioArg] = process.argv.slice(2);
const margin = Number(marginArg ?? 12);
const minRatio = Number(ratioArg ?? 1.5);
const a = JSON.parse(readFileSync(aPath, 'utf8'));
const b = JSON.parse(readFileSync(bPath, 'utf8'));
const key = (r) => `${r.c}/${r.n}/${r.t}`;
const aWin = new Map(a.records.filter((r) => r.window).map((r) => [key(r), r]));
const bAll = new Map(b.records.map((r) => [key(r), r]));
const common = [...aWin.keys()].filter((k) => bAll.has(k));
const sum = (m, f) => common.reduce((s, k) => s + m.get(k)[f], 0);
const ap = sum(aWin, 'prompt'), ac = sum(aWin, 'cached');
const bp = sum(bAll, 'prompt'), bc = sum(bAll, 'cached');
const same = common.filter((k) => aWin.get(k).prompt === bAll.get(k).prompt).length;
const ah = ap ? (100 * ac) / ap : 0, bh = bp ? (100 * bc) / bp : 0;
console.log(`over the same ${common.length} requests (${same} with equal prompt_tokens in both runs): `
  + `hit rate ${a.label} ${ah.toFixed(1)}%, ${b.label} ${bh.toFixed(1)}%, ratio ${(ah / bh).toFixed(2)}; `
  + `prefilled tokens ${a.label} ${ap - ac}, ${b.label} ${bp - bc} (${((bp - bc) / (ap - ac)).toFixed(2)}x)`);
let ok = common.length >= 32;
if (!ok) console.log(`FAILED: only ${common.length} requests in common (expected at least 32)`);
if (!(ah >= bh + margin)) {
  ok = false;
  console.log(`FAILED: ${a.label} ${ah.toFixed(1)}% is not ${margin} points above ${b.label} ${bh.toFixed(1)}%`);
}
if (!((bp - bc) >= minRatio * (ap - ac))) {
  ok = false;
  console.log(`FAILED: ${b.label} prefilled ${bp - bc} tokens, not ${minRatio}x ${a.label}'s ${ap - ac}`);
}
process.exit(ok ? 0 : 1);
