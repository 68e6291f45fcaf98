#!/usr/bin/env python3
"""Tokenizer parity: our C tokenizer against Hugging Face `tokenizers`.

Usage: check_tokenizer.py WORKDIR   (env GRPO_TOK_TEST_BIN: the C driver,
default build/tests/test_tokenizer; GRPO_ROOT: the repository).

Builds, from the real SmolLM2 GGUF, a `tokenizers.Tokenizer` equal to
SmolLM2's tokenizer.json (BPE + Sequence[Digits(individual), ByteLevel],
ByteLevel decoder, the 17 control tokens as special added tokens), and
variants around the same vocab with the GPT-2, Llama-3 and Qwen2
pre-tokenizers (Qwen2 also after its NFC normalizer; plus ignore_merges, add_prefix_space and non-special
added tokens with lstrip/rstrip). Each is saved as a tokenizer.json and
the C driver (test_tokenizer in driver mode) encodes a corpus with it;
ids must match exactly. Decoding is checked on the corpus (round trip)
and on random id sequences that cut UTF-8 characters apart.
Prints TAP; exits 1 on any mismatch, showing the first one."""
import json
import os
import random
import subprocess
import sys

from gguf import GGUFReader
from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers, pre_tokenizers, Regex

from tap import done, tap

ROOT = os.environ.get("GRPO_ROOT") or os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BIN = os.environ.get("GRPO_TOK_TEST_BIN") or os.path.join(ROOT, "build", "tests", "test_tokenizer")
MODEL = os.path.join(ROOT, "models", "SmolLM2-135M-Instruct.Q4_1.gguf")

LLAMA3_RE = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
             r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_RE = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
            r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
# o200k (GPT-4o, gpt-oss): tiktoken's o200k_base pat_str, as gpt-oss's tokenizer.json writes it
O200K_RE = "|".join([
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    r"\p{N}{1,3}",
    r" ?[^\s\p{L}\p{N}]+[\r\n/]*",
    r"\s*[\r\n]+",
    r"\s+(?!\S)",
    r"\s+",
])


def read_gguf(path):
    r = GGUFReader(path)

    def strings(key):
        f = r.fields[key]
        return [bytes(f.parts[d]).decode("utf-8") for d in f.data]

    f = r.fields["tokenizer.ggml.token_type"]
    types = [int(f.parts[d][0]) for d in f.data]
    return strings("tokenizer.ggml.tokens"), strings("tokenizer.ggml.merges"), types


def build(tokens, merges, types, pre, ignore_merges=False, extra_added=()):
    vocab = {t: i for i, t in enumerate(tokens)}
    pairs = [tuple(m.split(" ")) for m in merges]
    tk = Tokenizer(models.BPE(vocab=vocab, merges=pairs, ignore_merges=ignore_merges))
    tk.pre_tokenizer = pre
    tk.decoder = decoders.ByteLevel()
    tk.add_special_tokens([AddedToken(tokens[i], special=True, normalized=False)
                           for i, t in enumerate(types) if t == 3])
    if extra_added:
        tk.add_tokens(list(extra_added))
    return tk


def variants(tokens, merges, types):
    bl = pre_tokenizers.ByteLevel
    yield "smollm2", build(tokens, merges, types, pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True), bl(add_prefix_space=False, trim_offsets=True, use_regex=True)]))
    yield "gpt2", build(tokens, merges, types, bl(add_prefix_space=False, use_regex=True))
    for name, rx in (("llama3", LLAMA3_RE), ("qwen2", QWEN2_RE)):
        yield name, build(tokens, merges, types, pre_tokenizers.Sequence(
            [pre_tokenizers.Split(Regex(rx), behavior="isolated", invert=False),
             bl(add_prefix_space=False, trim_offsets=False, use_regex=False)]),
            ignore_merges=(name == "llama3"))
    # gpt-oss's (and GPT-4o's) tokenizer.json: o200k's Split, ByteLevel without regex
    yield "o200k", build(tokens, merges, types, pre_tokenizers.Sequence(
        [pre_tokenizers.Split(Regex(O200K_RE), behavior="isolated", invert=False),
         bl(add_prefix_space=False, trim_offsets=True, use_regex=False)]))
    # Qwen2's tokenizer.json as published: the same pre-tokenizer after an NFC normalizer
    nfc = build(tokens, merges, types, pre_tokenizers.Sequence(
        [pre_tokenizers.Split(Regex(QWEN2_RE), behavior="isolated", invert=False),
         bl(add_prefix_space=False, trim_offsets=False, use_regex=False)]))
    nfc.normalizer = normalizers.NFC()
    yield "qwen2-nfc", nfc
    # the less common knobs: prefix space, digit runs, non-special added tokens
    yield "misc", build(tokens, merges, types, pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=False), bl(add_prefix_space=True, use_regex=True)]),
        extra_added=[AddedToken("<tool>", lstrip=True, rstrip=True, normalized=True),
                     AddedToken("[[x]]", normalized=False), AddedToken("Hello", single_word=True)])


FIXED = [
    "", " ", "  ", "\n", "\t", "a", "Hello world", "Hello, world! How are you today?",
    "The quick brown fox jumps over the lazy dog.",
    "It's a test: don't, won't, they're, we've, I'm, you'll, he'd. IT'S DON'T THEY'RE WE'VE I'M YOU'LL HE'D",
    "'s 't 're 've 'm 'll 'd 'S 'T 'RE 'VE 'M 'LL 'D 'ſ",
    "1234567 3.14159 1,000 0.5 -42 +7 1e10 2024-01-31 10:45:00 ١٢٣ ½ ² Ⅻ",
    "    four spaces   three  two one", "trailing spaces   ", "   leading", "tabs\tand\t\ttabs\t",
    "line one\nline two\n\nline four\r\nwindows\rmac\n\n\n", " \n \n\t \n", "\u00a0nbsp\u2003em\u3000ideo\u180emvs\u200bzw\ufeffbom\u0085nel",
    "def f(x):\n    return x ** 2  # square\n\nfor i in range(10):\n\tprint(f(i))\n",
    "int main(void) { int a[3] = {1, 2, 3}; return a[0] + a[1]; }",
    "$\\frac{a}{b} + \\sqrt{x^2 + y^2} = \\int_0^\\infty e^{-x} dx$",
    "!!! ??? ... --- *** ### @@@ $$$ %%% ^^^ &&& ((( ))) [[[ ]]] {{{ }}} ||| ;;; ::: ,,, <<< >>> ~~~",
    "café naïve résumé Straße ßſ ÆØÅ æøå Ελληνικά Русский текст",
    "日本語のテキスト、中文文本，한국어 텍스트", "😀😃😄 👍🏽 👨‍👩‍👧‍👦 🇫🇷 ❤️",
    "العربية نص مرحبا بالعالم", "e\u0301 a\u0300 o\u0308 n\u0303 combining \u0301\u0302\u0303",
    "NFC: e\u0301t\u00e9 A\u030a \u212b \u1100\u1161\u11a8 \ufb01 q\u0307\u0323 \u0344 \u2126",
    "<|im_start|>e\u0301<|im_end|>\u0301 cafe\u0301<|endoftext|>\u0301",
    "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n4<|im_end|>",
    "<|endoftext|><|endoftext|>x<|im_end|>  <|im_start|> <|im_start|<|im_end|>>",
    "<tool> call <tool>  [[x]]y Hello HelloHello world Hello",
    "a\u2028b\u2029c \u205f \u202f \u1680 \u2000\u2001\u2002\u200a",
    "x" * 300, " " * 100, "9" * 50, "ab" * 200 + "\n" * 30,
    # o200k's case split, contraction suffixes, digit triples and "/" after punctuation
    "camelCase getHTTPResponseCode XMLHttpRequest iPhone McDonald's HELLOworld helloWORLD ÉCOLEécole écoleÉCOLE",
    "I'M they'll don't DON'T We'Ve SHE'D it'S o'clock rock'n'roll 'tis x''s ABC'sdef abc'Sdef Ab'LLc",
    "ǅungla ǈubav Ǌ ǋ ᾈᾉ ᾼα ǅǅ ǄǅǆDž Σίσυφος ΣΊΣΥΦΟΣ ς İıǰ",
    "ʰʷʲ ˈstress ᵃᵇᶜ aʰb Aʰ ーカー 々々 ㄅㄆ 〆x Xー",
    "E\u0301COLE e\u0301cole \u0301start A\u0301\u0302b ก่ำ หิ้ว हिन्दी বাংলা A\u20dd \u20ddx 1\u20e3 #\u20e3",
    "1 12 123 1234 12345 123456 1234567 ١٢٣٤ ߀߁߂߃ ²³ ½ Ⅻ 0x7F 3.14159 1,000,000 v1.2.3 a1b22c333d4444",
    "a/b/c //comment\n/path ./x .\n/\n/ :// ?!/\r\n/ </div>\n/ */\n",
    "  \n  \n\n \t\n\r\n  x  \n\t\t\n\n   \r\r\n\u00a0\n\u3000\n",
    "👍🏽 👨\u200d👩\u200d👧 🇫🇷 ❤️ 1️⃣ #️⃣ 🙂x x🙂 A🙂b",
    "中文English混合テキストKatakanaカタカナ한국어Korean",
]

PIECES = FIXED[5:] + [
    " ", "  ", "\t", "\n", "\r\n", "'s", "'LL", "'", "\"", "1", "23", "456", "7890", ".", ",", "é", "ß", "中", "😀",
    "ـ", "\u0301", "<|im_start|>", "<|im_end|>", "<|endoftext|>", "<tool>", "[[x]]", "Hello", " Hello", "the", " the",
    "ing", "tion", "http://example.com/a?b=c&d=e", "foo_bar", "fooBar", "__init__", "0x1F", "...", "—", "“quoted”",
    "camelCase", "HELLOworld", "ÉCOLEécole", "I'M", "they'll", "don't", "DON'T", "'Re", "ǅ", "ǈa", "ʰ", "ー",
    "\u20e3", "/", "//", "\n/", "A\u0301", "Σ", "ς", "ABC", "abc", "Abc", "aBC", "12345",
]

RANGES = [(0x20, 0x7E), (0xA0, 0x24F), (0x370, 0x3FF), (0x400, 0x4FF), (0x590, 0x6FF), (0x900, 0x97F),
          (0x3040, 0x30FF), (0x4E00, 0x4E80), (0xAC00, 0xAC80), (0x1F300, 0x1F64F), (0x2000, 0x206F),
          (0x0300, 0x036F), (0xFF00, 0xFFEF), (0x2150, 0x218F), (0x1D400, 0x1D47F),
          # upper/lower/title case, modifier letters and marks (o200k tells them apart)
          (0x41, 0x5A), (0x61, 0x7A), (0x1C4, 0x1CC), (0x1F00, 0x1FFF), (0x2B0, 0x2FF), (0x0E00, 0x0E7F),
          (0x20D0, 0x20FF), (0x10400, 0x1044F), (0xA640, 0xA69F), (0x27, 0x2F)]


def corpus(seed=20240531, n_random=3000):
    rng = random.Random(seed)
    out = list(FIXED)
    for _ in range(n_random):
        parts = []
        for _ in range(rng.randint(1, 10)):
            r = rng.random()
            if r < 0.6:
                parts.append(rng.choice(PIECES))
            elif r < 0.9:
                lo, hi = rng.choice(RANGES)
                parts.append("".join(chr(rng.randint(lo, hi)) for _ in range(rng.randint(1, 6))))
            else:
                parts.append(rng.choice(" \t\n\r\u00a0\u3000") * rng.randint(1, 5))
        out.append("".join(parts))
    return out


def run_driver(tok_json, lines, workdir, tag):
    inp = os.path.join(workdir, f"in-{tag}.jsonl")
    outp = os.path.join(workdir, f"out-{tag}.txt")
    with open(inp, "w") as f:
        for x in lines:
            f.write(json.dumps(x) + "\n")
    env = dict(os.environ, GRPO_TOK_JSON=tok_json, GRPO_TOK_IN=inp, GRPO_TOK_OUT=outp)
    p = subprocess.run([BIN], env=env, capture_output=True, text=True)
    if p.returncode != 0:
        return None, f"driver exited {p.returncode}: {p.stdout}{p.stderr}"
    with open(outp) as f:
        return f.read().split("\n")[:len(lines)], None


def check_encode(name, tk, path, texts, workdir, allow_special=True):
    key = "text" if allow_special else "nospecial"
    got, err = run_driver(path, [{key: t} for t in texts], workdir, name + key)
    if err:
        tap(False, f"{name}: encode ({key})", err)
        return []
    tk.encode_special_tokens = not allow_special
    want = [tk.encode(t, add_special_tokens=False).ids for t in texts]
    tk.encode_special_tokens = False
    for t, g, w in zip(texts, got, want):
        gi = [int(x) for x in g.split()]
        if gi != w:
            tap(False, f"{name}: encode ({key}) parity on {len(texts)} strings",
                f"text: {json.dumps(t)}\nhf:  {w}\nours: {gi}")
            return want
    tap(True, f"{name}: encode ({key}) parity on {len(texts)} strings")
    return want


def check_decode(name, tk, path, id_lists, workdir, what):
    got, err = run_driver(path, [{"ids": ids} for ids in id_lists], workdir, name + "dec")
    if err:
        tap(False, f"{name}: decode {what}", err)
        return
    for ids, g in zip(id_lists, got):
        want = [tk.decode(ids, skip_special_tokens=False), tk.decode(ids, skip_special_tokens=True)]
        gs = g.split("\t")
        if len(gs) != 2 or [json.loads(x) for x in gs] != want:
            tap(False, f"{name}: decode {what} ({len(id_lists)} sequences)",
                f"ids: {ids}\nhf:   {json.dumps(want)}\nours: {g}")
            return
    tap(True, f"{name}: decode {what} ({len(id_lists)} sequences, stream = batch)")


def english_text(size):
    """English prose for the speed measurement: the licence texts every Debian
    system has, else this file's English sentences; repeated to size bytes."""
    parts = []
    lic = "/usr/share/common-licenses"
    for name in ("GPL-3", "LGPL-3", "Apache-2.0", "MPL-2.0", "Artistic", "GFDL-1.3"):
        try:
            with open(os.path.join(lic, name), encoding="utf-8") as f:
                parts.append(f.read())
        except OSError:
            pass
    base = "\n".join(parts) or "\n".join(FIXED[6:10] + FIXED[18:20])
    return (base * (size // len(base) + 1))[:size]


def bench(tok_json, workdir):
    """Reports encode speed (a TAP comment, not a timed assertion) beside HF's
    one-string-at-a-time encode on the same text, one thread."""
    import time
    text = english_text(8 << 20)
    path = os.path.join(workdir, "bench.txt")
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    env = dict(os.environ, GRPO_TOK_JSON=tok_json, GRPO_TOK_BENCH=path)
    p = subprocess.run([BIN], env=env, capture_output=True, text=True)
    tap(p.returncode == 0, "encode speed measured", p.stdout + p.stderr)
    tk = Tokenizer.from_file(tok_json)
    sample = text.encode()[: 2 << 20].decode("utf-8", "ignore")
    docs, i = [], 0
    while i < len(sample):
        j = sample.find("\n", i + 4096)
        j = len(sample) if j < 0 else j + 1
        docs.append(sample[i:j])
        i = j
    t0 = time.perf_counter()
    for d in docs:
        tk.encode(d, add_special_tokens=False)
    dt = time.perf_counter() - t0
    print(f"# HF tokenizers on the same text: {len(sample.encode()) / dt / 1e6:.1f} MB/s (one string at a time)")


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: check_tokenizer.py WORKDIR")
    workdir = sys.argv[1]
    os.makedirs(workdir, exist_ok=True)
    if not os.path.exists(MODEL):
        print(f"1..0 # SKIP no model at {MODEL}")
        return 0
    tokens, merges, types = read_gguf(MODEL)
    texts = corpus()
    rng = random.Random(7)
    for name, tk in variants(tokens, merges, types):
        path = os.path.join(workdir, "tokenizer.json" if name == "smollm2" else f"tokenizer-{name}.json")
        tk.save(path)
        want = check_encode(name, tk, path, texts, workdir)
        check_encode(name, tk, path, texts[:400], workdir, allow_special=False)
        if name in ("smollm2", "misc"):
            bad = [(t, tk.decode(ids, skip_special_tokens=False)) for t, ids in zip(texts, want)
                   if tk.decode(ids, skip_special_tokens=False) != t]
            # HF's own round trip is exact on this corpus (misc: prefix spaces and
            # stripped spaces around <tool> are not given back)
            if name == "smollm2":
                tap(not bad, f"{name}: HF decode(encode(s)) == s on {len(texts)} strings",
                    bad and f"first: {json.dumps(bad[0][0])} -> {json.dumps(bad[0][1])}")
            check_decode(name, tk, path, want, workdir, "of the corpus ids")
            n = len(tokens) + (3 if name == "misc" else 0)
            rand = [[rng.randrange(n) for _ in range(rng.randint(0, 12))] for _ in range(1500)]
            # ids of single UTF-8 lead/continuation bytes, to cut characters apart
            byte_ids = [tk.token_to_id("".join(ch)) for ch in ("â", "Ģ", "Ĥ", "ð", "Ł", "ĺ", "Ĳ", "Ń", "Ã", "©", "ĥ")]
            byte_ids = [i for i in byte_ids if i is not None]
            rand += [[rng.choice(byte_ids + [0, 1, 2, 260, 5000]) for _ in range(rng.randint(1, 10))] for _ in range(1500)]
            check_decode(name, tk, path, rand, workdir, "of random ids")
    bench(os.path.join(workdir, "tokenizer.json"), workdir)
    return done()


if __name__ == "__main__":
    sys.exit(main())
