#!/usr/bin/python3
"""The pre-tokenizer's pieces against Python's `regex` module.

  check_pretok.py INFERNO HF_DIR GGUF CORPUS_JSONL TMP

`inferno tokenize --pretokens --jsonl` gives, per input string, the pieces
BPE merges: the added tokens cut out, the text between them NFC-normalized
and split by the pre-tokenizer regex (PCRE2). The oracle does the same steps
with other code: the added tokens of tokenizer.json cut out leftmost-longest
(special parsing on), unicodedata's NFC, and regex.finditer (mrab-regex, not
PCRE2) with the pattern a tokenizer.json states, every match and every gap
between matches a piece (tokenizers' Split, behavior Isolated).

Four sources, two patterns:
  qwen2   Qwen3's tokenizer.json (HF_DIR), with the pattern read from it;
          GGUF as it is (tokenizer.ggml.pre "qwen2": the table's copy);
  qwen35  that tokenizer.json with its Split pattern replaced by Qwen3.5's
          (QWEN35 below: inferno reads the file's own pattern and names it
          qwen35); GGUF with tokenizer.ggml.pre rewritten to "qwen35", as
          llama.cpp's converter names Qwen3.5's pre-tokenizer (inferno takes
          its own table's copy of the pattern; the oracle still the file's).
The strings: the tokenizer corpus (tokenizer_corpus.mjs) plus MARKS, texts
dense in combining marks, where the two patterns part. Prints the first
mismatches (expected vs actual, where they first differ), then
"N passed, N failed"."""
import json
import os
import subprocess
import sys
import unicodedata

import regex

# Qwen3.5's Split pattern as its tokenizer.json states it (Hugging Face
# Qwen/Qwen3.5-*; the same string is quoted as "original regex from
# tokenizer.json" above LLAMA_VOCAB_PRE_TYPE_QWEN35 in llama.cpp's
# src/llama-vocab.cpp, whose converter calls it "qwen35"). Qwen2/Qwen3's with
# \p{M} joining \p{L} in the letter runs and leaving the punctuation runs.
QWEN35 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}|"
          r" ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

# Marks of every kind (Mn, Mc, Me) in words, after spaces, digits, punctuation
# and added tokens, and at the start; only characters assigned by Unicode 14
# (PCRE2 10.42's tables).
MARKS = [
    "नमस्ते दुनिया", "हिन्दी में लिखें।", "क्षत्रिय", "ज़िंदगी",
    "สวัสดีครับ ผมชื่ออเล็กซ์", "น้ำแข็ง", "กรุงเทพมหานคร", "ภาษาไทย 123",
    "שָׁלוֹם עֲלֵיכֶם", "בְּרֵאשִׁית בָּרָא אֱלֹהִים", "עִבְרִית",
    "اللُّغَةُ العَرَبِيَّةُ", "مُحَمَّدٌ",
    "தமிழ் மொழி", "বাংলা ভাষা", "ಕನ್ನಡ", "മലയാളം", "తెలుగు", "ગુજરાતી", "ਪੰਜਾਬੀ",
    "မြန်မာစာ", "ភាសាខ្មែរ", "ພາສາລາວ", "བོད་ཡིག", "සිංහල",
    "Cafe\u0301 au lait", "nai\u0308ve re\u0301sume\u0301", "Tie\u0302\u0301ng Vie\u0323\u0302t",
    "A\u030angstro\u0308m", "q\u0307\u0323", "a\u0301\u0301b", "Z\u0335\u0321\u0324\u0347algo",
    "x\u20dd y\u20de", "\u0301", "\u0301\u0301\u0301x", " \u0301x", "a \u0301 b", "1\u0301", "12\u0301\u0302",
    "!\u0301", "?\u0301!\u0301", "\u0301\n", "\t\u0301\t", "e\u0301'S", "'\u0301s", "I\u0301'm",
    "don't\u0301", "\u0301'LL", "<think>\u0301</think>", "<|im_end|>\u0301x", "\u1100\u1161\u11a8",
    "👍🏽", "👩🏽‍💻 coding", "❤️ love", "1️⃣2️⃣", "#️⃣ tag", "🏳️‍🌈", "👁️‍🗨️", "☝🏿!",
    "a\ufe0f", "\u200d\u0301", "x\u034fy", "\u3099\u309a", "か\u3099", "ｶﾞ",
]


def read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def oracle(pattern, added, nfc):
    """The pieces of a string: added tokens, then each stretch's matches and gaps."""
    re_split = regex.compile(pattern)
    cut = (regex.compile("|".join(regex.escape(a) for a in sorted(added, key=len, reverse=True)))
           if added else None)

    def split(text):
        if nfc:
            text = unicodedata.normalize("NFC", text)
        out, at = [], 0
        for m in re_split.finditer(text):
            if m.start() > at:
                out.append(text[at:m.start()])
            if m.end() > m.start():
                out.append(m.group())
                at = m.end()
        if at < len(text):
            out.append(text[at:])
        return out

    def pieces(s):
        out, at = [], 0
        for m in (cut.finditer(s) if cut else ()):
            if m.start() > at:
                out += split(s[at:m.start()])
            out.append(m.group())
            at = m.end()
        if at < len(s):
            out += split(s[at:])
        return out

    return pieces


def run_inferno(inferno, model, strings):
    r = subprocess.run([inferno, "tokenize", "-m", model, "--pretokens", "--jsonl"],
                       input="".join(json.dumps(s) + "\n" for s in strings).encode(),
                       capture_output=True)
    lines = r.stdout.decode("utf-8").split("\n")[:-1]  # not splitlines: U+2028 is in the text
    if r.returncode or len(lines) != len(strings):
        print(f"inferno tokenize -m {model} --pretokens --jsonl: exit {r.returncode}, "
              f"{len(lines)} lines for {len(strings)} strings; stderr:\n{r.stderr.decode()[:2000]}")
        return None
    return [json.loads(line) for line in lines]


def main():
    inferno, hf_dir, gguf, corpus_path, tmp = sys.argv[1:6]
    strings = read_jsonl(corpus_path) + MARKS
    with open(os.path.join(hf_dir, "tokenizer.json"), encoding="utf-8") as f:
        tj = json.load(f)
    added = [t["content"] for t in tj["added_tokens"]]
    nfc = (tj.get("normalizer") or {}).get("type") == "NFC"
    split = next(p for p in tj["pre_tokenizer"]["pretokenizers"] if p["type"] == "Split")
    qwen2 = split["pattern"]["Regex"]

    # qwen35 sources: the tokenizer.json with Qwen3.5's pattern; the GGUF renamed
    split["pattern"]["Regex"] = QWEN35
    d35 = os.path.join(tmp, "qwen35-hf")
    os.makedirs(d35)
    with open(os.path.join(d35, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tj, f, ensure_ascii=False)
    g35 = os.path.join(tmp, "qwen35.gguf")
    edit = os.path.join(os.path.dirname(os.path.abspath(__file__)), "gguf_edit.py")
    subprocess.run([sys.executable, edit, gguf, g35, "--str", "tokenizer.ggml.pre", "qwen35"],
                   check=True)

    expect = {name: [oracle(p, added, nfc)(s) for s in strings]
              for name, p in (("qwen2", qwen2), ("qwen35", QWEN35))}
    parted = sum(a != b for a, b in zip(expect["qwen2"], expect["qwen35"]))
    print(f"{len(strings)} strings ({len(MARKS)} dense in marks); the qwen2 and qwen35 patterns "
          f"split {parted} of them differently")
    passed = failed = shown = 0
    if parted == 0:
        print("the two patterns never part: the corpus does not exercise \\p{M}")
        failed += 1
    for label, model, name in (("Qwen3 tokenizer.json", hf_dir, "qwen2"),
                               (os.path.basename(gguf), gguf, "qwen2"),
                               ("tokenizer.json with Qwen3.5's pattern", d35, "qwen35"),
                               (os.path.basename(gguf) + " as pre qwen35", g35, "qwen35")):
        got = run_inferno(inferno, model, strings)
        if got is None:
            failed += 1
            continue
        bad = 0
        for s, want, have in zip(strings, expect[name], got):
            if want == have:
                passed += 1
                continue
            failed += 1
            bad += 1
            if shown < 10:
                shown += 1
                at = next((i for i, (a, b) in enumerate(zip(want, have)) if a != b),
                          min(len(want), len(have)))
                print(f"MISMATCH {label} ({name}): input {json.dumps(s)}\n"
                      f"  expected {json.dumps(want, ensure_ascii=False)}\n"
                      f"  actual   {json.dumps(have, ensure_ascii=False)}\n"
                      f"  first difference at piece {at}")
        print(f"{label} ({name}): {len(strings)} strings, {bad} differ")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
