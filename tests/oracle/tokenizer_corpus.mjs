// A deterministic corpus of varied strings for the tokenizer oracle check.
//
// makeCorpus(n) returns n strings drawn with a fixed seed from generators for
// English prose, code, CJK, Arabic, Hebrew, Devanagari, emoji (ZWJ sequences,
// skin tones, flags, keycaps), combining marks, NFC/NFD pairs, digit runs,
// whitespace runs, tabs, \r\n, contractions in any case, and special tokens
// inside text, plus mixtures of all of these.
//
// Characters are limited to what every engine in the comparison knows:
// letters and digits assigned by Unicode 14 (PCRE2 10.42's tables), and no
// U+0085 (JavaScript's \s lacks it; Oniguruma's and PCRE2's have it), which
// is checked separately against @huggingface/tokenizers only.

// mulberry32: a small seeded PRNG, so the corpus is the same on every run.
function rng(seed) {
    let a = seed >>> 0;
    return () => {
        a = (a + 0x6d2b79f5) >>> 0;
        let t = a;
        t = Math.imul(t ^ (t >>> 15), t | 1);
        t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
        return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    };
}

const WORDS = (
    "the of and to in is was that for it with as his on be at by this had not are but from or " +
    "have an they which one you were her all she there would their we him been has when who " +
    "will more no if out so said what up its about into than them can only other new some " +
    "could time these two may then do first any my now such like our over man me even most " +
    "made after also did many before must through back years where much your way well down " +
    "should because each just those people how too little state good very make world still " +
    "own see men work long get here between both life being under never day same another know " +
    "while last might us great old year off come since against go came right used take three " +
    "tokenizer inference engine transformer attention quantization benchmark throughput " +
    "internationalization antidisestablishmentarianism Hello World OpenAI Qwen llama " +
    "naïve café résumé coöperate façade jalapeño Zürich Ångström smörgåsbord"
).split(" ");
const CONTRACTIONS = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d"];
const PUNCT = [".", ",", "!", "?", ";", ":", "...", " -", " —", "\u2026", "\u201c", "\u201d",
               "\u2018", "\u2019", "(", ")", "\"", "'", "!!", "?!"];
const CODE = [
    "int main(int argc, char **argv) {\n\treturn 0;\n}\n",
    "def f(x):\n    return x ** 2 + 3*x - 1  # comment\n",
    "for (size_t i = 0; i < n; i++) sum += a[i] * b[i];",
    "const re = /^\\s*(\\d+)\\s*$/u; // regex\nconsole.log(`${a}+${b}`);",
    "if x != nil {\n\t\treturn fmt.Errorf(\"bad: %w\", err)\n\t}",
    "SELECT id, name FROM users WHERE age >= 18 ORDER BY name DESC;",
    "<div class=\"a\">&nbsp;<span>x &lt; y</span></div>",
    "{\"key\": [1, 2.5, -3e10, true, null], \"s\": \"\\u00e9\\n\"}",
    "#include <stdio.h>\r\n#define MAX(a,b) ((a)>(b)?(a):(b))\r\n",
    "fn main() -> Result<(), Box<dyn Error>> { let v: Vec<u8> = vec![0xff; 16]; Ok(()) }",
    "    \n        \n\t\t\n",
    "x=1;y=2;z=x+y;;;;;",
    "a->b->c && d || !e ^ f | g & ~h << 2 >> 3",
    "git commit -m 'fix: handle \\r\\n in parser' && make -j2",
    "$ echo \"$HOME\" | sed -e 's/\\//_/g'",
];
const CJK = ["我们今天去公园散步。", "机器学习模型的推理速度", "你好，世界！", "中华人民共和国",
             "東京は日本の首都です。", "ひらがなとカタカナ", "カタカナ", "한국어 텍스트입니다.",
             "안녕하세요", "漢字かな交じり文", "第１２３章", "（括弧）「引用」『二重』【隅付き】"];
const ARABIC = ["مرحبا بالعالم", "اللُّغَةُ العَرَبِيَّةُ", "السلام عليكم ورحمة الله",
                "٠١٢٣٤٥٦٧٨٩", "كتاب، قلم؟ نعم!", "שלום עולם", "עִבְרִית"];
const DEVANAGARI = ["नमस्ते दुनिया", "हिन्दी भाषा", "क़ ख़ ग़ ज़ ड़ ढ़ फ़ य़", "संस्कृतम्",
                    "०१२३४५६७८९", "श्री", "ऩ", "\u0928\u093c", "ক্ষ বাংলা", "தமிழ்"];
const EMOJI = ["😀", "👍", "👍🏽", "👍🏿", "👨‍👩‍👧‍👦", "👩🏽‍💻", "🏳️‍🌈", "❤️", "❤", "🇯🇵",
               "🇺🇸🇫🇷", "1️⃣", "#️⃣", "🧑🏻‍🤝‍🧑🏿", "👁️‍🗨️", "🤷‍♀️", "🐈‍⬛", "✌🏼", "🫠", "😶‍🌫️"];
const COMBINING = ["e\u0301", "a\u0308", "o\u0302\u0301", "Z\u0335\u0321\u0324\u0347",
                   "n\u0303", "\u0301", "\u0301\u0301\u0301", "i\u0307", "u\u031b\u0323",
                   "\u1100\u1161\u11a8", "\u1100\u1161", "A\u030a", "\u212b", "\u2126", "\u00c5",
                   "e\u0323\u0302", "e\u0302\u0323", "q\u0307\u0323", ">\u0338", "=\u0338",
                   "\u0915\u093c", "\u0061\u0328\u0301", "\u0041\u0300\u0316"];
const NFC_PAIRS = [["é", "e\u0301"], ["Å", "A\u030a"], ["ñ", "n\u0303"], ["ệ", "e\u0323\u0302"],
                   ["가", "\u1100\u1161"], ["각", "\u1100\u1161\u11a8"], ["ǖ", "u\u0308\u0304"],
                   ["Ω", "\u2126"], ["ḱ", "k\u0301"], ["ﬁ", "ﬁ"], ["Ä", "A\u0308"],
                   ["ö", "o\u0308"]];
const DIGITS = ["0", "1", "12", "123", "1234", "12345678901234567890", "3.14159", "1,000,000",
                "v1.2.3", "2024-01-15", "0x1F", "１２３", "٣٤٥", "৩৪", "①②", "Ⅻ", "½", "²³"];
const SPACES = [" ", "  ", "   ", "        ", "\t", "\t\t", "\n", "\n\n", "\r\n", "\r\n\r\n", "\r",
                " \n", "\n ", " \t ", "\u00a0", "\u3000", "\u2003", "\u200b", "\u2028", "\f",
                "\v", "  \n\n  ", "\n\t", "\t\n"];
const SPECIALS = ["<|im_start|>", "<|im_end|>", "<|endoftext|>", "<think>", "</think>",
                  "<tool_call>", "</tool_call>", "<tool_response>", "<|fim_prefix|>",
                  "<|vision_start|>", "<|im_start", "<|im_end", "im_end|>", "<|", "|>", "<<|im_end|>>",
                  "<|im_start|><|im_end|>", "<think></think>", "<|IM_END|>", "< think >",
                  "<|im_start|>user\n", "<|im_start|>assistant\n<think>\n\n</think>\n\n"];

function makeCorpus(n, seed = 20240601) {
    const r = rng(seed);
    const pick = (a) => a[Math.floor(r() * a.length)];
    const int = (lo, hi) => lo + Math.floor(r() * (hi - lo + 1));
    const caseMix = (s) => {
        const m = r();
        if (m < 0.15) return s.toUpperCase();
        if (m < 0.3) return s.charAt(0).toUpperCase() + s.slice(1);
        if (m < 0.4) return [...s].map((c) => (r() < 0.5 ? c.toUpperCase() : c)).join("");
        return s;
    };
    const word = () => {
        let w = caseMix(pick(WORDS));
        if (r() < 0.12) w += caseMix(pick(CONTRACTIONS));
        return w;
    };
    const sentence = () => {
        const k = int(3, 18);
        let s = "";
        for (let i = 0; i < k; i++) {
            s += (i ? " " : "") + word();
            if (r() < 0.12) s += pick(PUNCT);
        }
        return s + pick([".", "!", "?", "", "\n", ".\n\n"]);
    };
    const prose = () => {
        const k = int(1, 5);
        let s = "";
        for (let i = 0; i < k; i++) s += (i ? pick([" ", "  ", "\n", "\n\n", "\r\n"]) : "") + sentence();
        return s;
    };
    const contractions = () => {
        const bases = ["it", "He", "SHE", "we", "They", "I", "you", "Bob", "x", "1", " ", ""];
        let s = "";
        const k = int(1, 6);
        for (let i = 0; i < k; i++) {
            let c = pick(CONTRACTIONS);
            c = [...c].map((ch) => (r() < 0.5 ? ch.toUpperCase() : ch)).join("");
            s += pick(bases) + c + pick([" ", "", "'", "''", ".", "s"]);
        }
        return s;
    };
    const fromList = (list, maxk, seps) => () => {
        const k = int(1, maxk);
        let s = "";
        for (let i = 0; i < k; i++) s += (i ? pick(seps) : "") + pick(list);
        return s;
    };
    const nfcPair = () => {
        const [c, d] = pick(NFC_PAIRS);
        const w = pick(WORDS);
        const form = r() < 0.5 ? c : d;
        return pick([form, w + form, form + w, " " + form + " " + w, form + form]);
    };
    const digits = () => {
        let s = "";
        const k = int(1, 4);
        for (let i = 0; i < k; i++) {
            if (r() < 0.3) s += String(int(0, 10 ** int(1, 12)));
            else s += pick(DIGITS);
            s += pick(["", " ", "  ", ".", ",", "\n", "abc", "%"]);
        }
        return s;
    };
    const spaces = () => {
        let s = "";
        const k = int(1, 6);
        for (let i = 0; i < k; i++) s += pick(SPACES) + (r() < 0.6 ? pick(WORDS) : pick(PUNCT));
        if (r() < 0.5) s += pick(SPACES);
        if (r() < 0.2) s = pick(SPACES) + s;
        return s;
    };
    const longRun = () => {
        const unit = pick([" ", "\n", "\t", "a", "ab", "=", "-", "1", "😀", "é", "中", "\r\n", " \n"]);
        return pick(["", "x", "x "]) + unit.repeat(int(2, 300)) + pick(["", "x", " x", "\n"]);
    };
    const specials = () => {
        let s = "";
        const k = int(1, 5);
        for (let i = 0; i < k; i++) {
            const m = r();
            if (m < 0.5) s += pick(SPECIALS);
            else if (m < 0.8) s += sentence();
            else s += pick([" ", "\n", "", "\u0338", "\u0301", "|", "<", ">"]);
        }
        return s;
    };
    const randomCp = () => {
        // Code points from assigned, stable blocks (Unicode <= 14).
        const ranges = [[0x20, 0x7e], [0xa0, 0x24f], [0x300, 0x36f], [0x370, 0x3ff], [0x400, 0x4ff],
                        [0x590, 0x5ff], [0x600, 0x6ff], [0x900, 0x97f], [0xe00, 0xe5b],
                        [0x1100, 0x11ff], [0x2000, 0x206f], [0x2190, 0x22ff], [0x3040, 0x30ff],
                        [0x4e00, 0x9fa5], [0xac00, 0xd7a3], [0xff01, 0xff5e], [0x1f300, 0x1f5ff],
                        [0x1f900, 0x1f9ff], [0x1d400, 0x1d4ff], [0x10000, 0x1005d]];
        const k = int(1, 24);
        let s = "";
        for (let i = 0; i < k; i++) {
            const [lo, hi] = pick(ranges);
            let cp = int(lo, hi);
            if (cp === 0x85 || (cp >= 0x2065 && cp <= 0x2069) || cp === 0x061c) cp = 0x20;
            s += String.fromCodePoint(cp);
        }
        return s;
    };
    const gens = [
        [prose, 18], [fromList(CODE, 3, ["", "\n", "\n\n", "  "]), 9],
        [fromList(CJK, 4, ["", " ", "。", "\n", "，"]), 7], [fromList(ARABIC, 4, [" ", "، ", "\n", ""]), 5],
        [fromList(DEVANAGARI, 4, [" ", "। ", "\n", ""]), 5],
        [fromList(EMOJI, 6, ["", " ", "  ", "\n", "a", "1"]), 8],
        [fromList(COMBINING, 5, ["", " ", "x", "\n"]), 6], [nfcPair, 6], [digits, 6], [spaces, 7],
        [contractions, 7], [specials, 9], [longRun, 3], [randomCp, 6],
    ];
    const total = gens.reduce((a, g) => a + g[1], 0);
    const one = () => {
        let x = r() * total;
        for (const [g, w] of gens) if ((x -= w) < 0) return g();
        return gens[0][0]();
    };
    const out = [];
    const seen = new Set();
    // Fixed cases first: the book's example and the edges named in the issue.
    for (const s of ["Hello, world!", "", " ", "\n", "a", "'S", "'LL", "I'M", "DON'T", "you'Re",
                     "<|im_end|>\u0338", "e\u0301", "\u00e9", "👨‍👩‍👧‍👦", "\r\n", "\t\tx"]) {
        out.push(s);
        seen.add(s);
    }
    while (out.length < n) {
        let s = one();
        const m = r();
        if (m < 0.25) s += pick([" ", "\n", ""]) + one(); // mixtures
        if (m > 0.95) s = one() + one() + one();
        if (seen.has(s)) continue;
        seen.add(s);
        out.push(s);
    }
    return out;
}

export { makeCorpus };
