// Compares `inferno inspect --json FILE` with @huggingface/gguf's parse of
// the same file: version and counts, every metadata key in order with its
// type and value, every tensor's name, type, shape and offset, and the data
// section's offset. Usage: node check_inspect.mjs INFERNO FILE.gguf
// Prints mismatches and a closing "N passed, N failed" line.
import { execFileSync } from "node:child_process";
import { gguf } from "@huggingface/gguf";

const [inferno, file] = process.argv.slice(2);
let passed = 0, failed = 0;
function check(ok, what) {
  if (ok) passed++;
  else {
    failed++;
    if (failed <= 20) console.log(`${file}: MISMATCH ${what}`);
  }
}

const TYPES = ["UINT8", "INT8", "UINT16", "INT16", "UINT32", "INT32", "FLOAT32", "BOOL",
               "STRING", "ARRAY", "UINT64", "INT64", "FLOAT64"];

// Our JSON writes 64-bit integers as decimal strings; theirs are bigints.
function same(ours, theirs) {
  if (typeof theirs === "bigint") return ours === theirs.toString();
  if (Array.isArray(theirs)) {
    if (!Array.isArray(ours) || ours.length !== theirs.length) return false;
    for (let i = 0; i < theirs.length; i++) if (!same(ours[i], theirs[i])) return false;
    return true;
  }
  if (typeof theirs === "number" && Number.isNaN(theirs)) return ours === "nan" || ours === "-nan";
  return ours === theirs;
}
const show = (v) => JSON.stringify(v, (k, x) => (typeof x === "bigint" ? x.toString() : x))?.slice(0, 120);

const out = execFileSync(inferno, ["inspect", "--json", file], { maxBuffer: 1 << 30 }).toString();
const ours = JSON.parse(out);
const ref = await gguf(file, { allowLocalFile: true, typedMetadata: true });
const tm = ref.typedMetadata;

check(ours.format === "gguf", "format");
check(ours.version === tm.version.value, `version ${ours.version} vs ${tm.version.value}`);
check(BigInt(ours.metadata.length) === tm.kv_count.value, "metadata count");
check(BigInt(ours.tensors.length) === tm.tensor_count.value, "tensor count");
check(BigInt(ours.data_offset) === ref.tensorDataOffset,
      `data offset ${ours.data_offset} vs ${ref.tensorDataOffset}`);

const refKeys = Object.keys(tm).filter((k) => !["version", "tensor_count", "kv_count"].includes(k));
check(same(ours.metadata.map((m) => m.key), refKeys), "metadata keys and order");
for (const m of ours.metadata) {
  const r = tm[m.key];
  if (!r) { check(false, `key ${m.key} missing in reference`); continue; }
  check(m.type === TYPES[r.type], `${m.key} type ${m.type} vs ${TYPES[r.type]}`);
  if (r.type === 9) check(m.elem_type === TYPES[r.subType], `${m.key} element type ${m.elem_type} vs ${TYPES[r.subType]}`);
  check(same(m.value, r.value), `${m.key} value ${show(m.value)} vs ${show(r.value)}`);
}

const n = Math.min(ours.tensors.length, ref.tensorInfos.length);
for (let i = 0; i < n; i++) {
  const a = ours.tensors[i], b = ref.tensorInfos[i];
  check(a.name === b.name, `tensor ${i} name ${a.name} vs ${b.name}`);
  check(a.type_id === b.dtype, `${a.name} type ${a.type_id} vs ${b.dtype}`);
  check(same(a.shape.map(String), b.shape.map(String)), `${a.name} shape ${show(a.shape)} vs ${show(b.shape)}`);
  check(BigInt(a.offset) === b.offset, `${a.name} offset ${a.offset} vs ${b.offset}`);
  check(BigInt(a.file_offset) === ref.tensorDataOffset + b.offset, `${a.name} file offset`);
}
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
