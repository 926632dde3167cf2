"""Strings where a BERT tokenizer most easily departs from the original one.

Each is compared, id for id, with the original Python `FullTokenizer`
(tests/text/test_tokenizer_parity.py). Grouped by what they exercise.
"""

HARD_CASES = [
    # --- plain text, punctuation runs ---
    "Hello, world!",
    "The quick brown fox jumps over the lazy dog.",
    "unaffable unwanted running",
    "!!!???...,,,;;;:::",
    "\"Quoted\" 'single' `back` (paren) [bracket] {brace} <angle>",
    "$100.00 #hashtag @mention 50% a&b a*b a+b a=b a^b a|b a~b a_b a\\b a/b",
    "e-mail, well-known, state-of-the-art -- dash --- and ---",
    "don't won't it's O'Neil rock'n'roll",
    "3.14159 1,000,000 1e-5 0x1F 10:30pm 2023-01-01",
    "http://www.example.com/path?query=1&x=y#frag",
    "user@example.com",
    # --- case, Python str.lower() specifics ---
    "ΟΔΟΣ ΟΔΟΣ. ΑΣ.Β ΑΣ,Β Σ ΑΣΣ ΣΑ",  # final sigma depends on the whole word
    "ΌΣΟΣ ΜΈΣΑ ΣΊΣΥΦΟΣ",
    "Α\u0301Σ\u0301 ΑΣ\u00adΒ ΑΣ\x00Β ΑΣ\u200bΒ",  # case-ignorable / deleted characters after sigma
    "İstanbul İZMİR i̇",  # dotted capital I: lower() gives i + U+0307
    "Straße STRASSE ß ẞ",
    "ǅungla ǄUNGLA ǆ Ǳ ǲ",  # titlecase digraphs
    "ﬁ ﬂ ﬀ ﬃ ﬄ ﬅ ﬆ office ﬁnance",  # ligatures (NFD keeps them)
    "MiXeD CaSe WoRdS ALLCAPS",
    "Ωmega Kelvin\u212a Ångström\u212b",  # Ohm / Kelvin / Angstrom signs
    # --- full-width, compatibility and number forms ---
    "ＦＵＬＬ ｗｉｄｔｈ ＡＢＣ １２３ ！？",
    "x² H₂O E=mc² ¹²³ ⁴⁵⁶",
    "Ⅰ Ⅱ Ⅲ Ⅳ ⅰ ⅱ ⅲ Ⅻ",  # Roman numerals
    "① ② ⑩ ⑳ ㉑ ⓐ Ⓐ",  # circled
    "½ ¼ ¾ ⅓ ⅞",
    "™ © ® ℠ № ℃ ℉",
    "µ μ Å Å",  # micro sign, mu, A-ring composed / decomposed
    # --- accents and combining sequences ---
    "naïve café résumé jalapeño façade Zoë coöperate",
    "Crème Brûlée À LA CARTE",
    "e\u0301 e\u0300\u0301\u0302 a\u0308\u0304 n\u0303",  # decomposed marks
    "\u0301\u0302 leading marks",
    "Z\u0351\u036b\u0343\u036a\u0302\u036b\u033d\u034f\u0334\u0319\u0324\u031e\u0349\u035a\u032f\u031e\u0320\u034dA\u036b\u0357\u0334\u0362\u0335\u031c\u0330\u0354L\u0368\u0367\u0369\u0358\u0320G\u0311\u0357\u030e\u0305\u035b\u0341\u0334\u033b\u0348\u034d\u0354\u0339O\u0342\u030c\u030c\u0358\u0328\u0335\u0339\u033b\u031d\u0333",
    "Việt Nam Tiếng Việt Hà Nội",
    "Ærøskøbing Øresund æble",
    "Łódź Gdańsk Kraków Wrocław",
    "Mn\u0903Mc \u0bcd\u0bca",  # spacing marks (Mc) stay
    # --- controls and invisible characters ---
    "a\x00b\u200bc  \u2028 d",
    "bell\x07 escape\x1b[31m delete\x7f nel\x85line",
    "a\x01b\x02c\x03d\x04e\x05f\x06g\x08h",
    "vertical\x0btab form\x0cfeed file\x1csep\x1dgroup\x1erecord\x1funit",
    "zero\u200bwidth non\u200cjoiner jo\u200diner\u2060word",
    "\ufeffBOM at start and in\ufeffmiddle",
    "soft\u00adhyphen co\u00adop\u00ader\u00adate",
    "tab\there new\nline carriage\rreturn crlf\r\nend",
    "non\u00a0breaking em\u2003space en\u2002space thin\u2009space",
    "ideographic\u3000space narrow\u202fnbsp math\u205fspace ogham\u1680space",
    "line\u2028separator paragraph\u2029separator",
    "left\u200eto\u200fright \u202aembed\u202c \u2066isolate\u2069",
    "mongolian\u180evowel separator",
    "\u00a0\u00a0 leading and trailing \u3000\u3000",
    "",
    "   ",
    "\x00\x00\x00",
    "\u200b\u200b",
    "\ufffd replacement \ufffd char\ufffdin",
    # --- emoji ---
    "I love 🍕 and 🍣!",
    "family 👨\u200d👩\u200d👧\u200d👦 zwj",
    "skin 👋🏽 👍🏿 tone",
    "flags 🇺🇸 🇯🇵 🇬🇧 🏴\U000e0067\U000e0062\U000e0065\U000e006e\U000e0067\U000e007f",
    "keycap 1\ufe0f\u20e3 #\ufe0f\u20e3 heart ❤\ufe0f ❤",
    "😀😃😄😁 no spaces😂",
    "emoji✨in🎉between",
    # --- CJK and East Asian ---
    "中文分词测试",
    "我爱北京天安门。你好，世界！",
    "日本語のテキスト、カタカナとひらがな。",
    "ｶﾀｶﾅ 半角カナ",
    "한국어 텍스트 처리 안녕하세요",
    "한\u1100\u1161 decomposed hangul",
    "「引用」『二重』【括弧】〔亀甲〕",
    "𠀀𠀁 extension B 𪜀 ext C 𫝀 ext D",
    "豈 更 compatibility ideographs 丽",
    "mixed中文English日本語한국어",
    "⼀ ⼆ kangxi radicals ⺀",
    # --- other scripts ---
    "Привет, мир! Ёлка ёжик",
    "Ελληνικά: Αθήνα, Θεσσαλονίκη. ΐ ΰ",
    "مرحبا بالعالم، كيف حالك؟",
    "العَرَبِيَّة with harakat",
    "שָׁלוֹם עולם",
    "नमस्ते दुनिया। हिन्दी",
    "ภาษาไทย สวัสดีครับ",
    "ქართული ენა",
    "Հայերեն լեզու",
    "தமிழ் மொழி",
    "ᏣᎳᎩ Cherokee ꭰ",
    "𝐁𝐨𝐥𝐝 𝑖𝑡𝑎𝑙𝑖𝑐 𝔉𝔯𝔞𝔨𝔱𝔲𝔯 𝟙𝟚𝟛",  # mathematical alphanumerics
    "Ⓒⓘⓡⓒⓛⓔⓓ ⒫⒜⒭⒠⒩",
    "ʰᵉˡˡᵒ modifier letters ˈstress",
    # --- unusual code points ---
    "private\ue000use\uf8ff and \U000f0000\U00100000",
    "non\ufdd0characters\uffff\ufffe",
    "unassigned\u0378\u0379 \U000e0080 \U0003fffd",
    "tags\U000e0041\U000e0042 variation\ufe00\ufe0f",
    "math ∑∫√∞≠≤≥ ± × ÷ ← → ↑ ↓",
    "currency € £ ¥ ₹ ₩ ₽ ¢",
    "quotes “double” ‘single’ «guillemets» „low“ ‹single›",
    "dashes ‐ ‑ ‒ – — ― … · •",
    "¡Hola! ¿Qué tal?",
    "box ─│┌┐└┘├┤ ■□▲△ ♠♣♥♦ ♪♫",
    "braille ⠁⠃⠉ and runic ᚠᚢᚦ",
    "greek question mark\u037e ano teleia\u0387 varia\u1fef oxia\u1ffd",
    "a\u1fefb a\u1fed\u1feeb",
    "combining\u20dd enclosing\u20e0 marks",
    "superscript\u1dbf\u1d43 small caps ᴀʙᴄ",
    # --- long words (the original's limit is in characters) ---
    "a" * 199,
    "ΑΣ" * 101,  # 202 characters; its lowercase ends in final sigma
    "b" * 200,
    "c" * 201,
    "x " + "é" * 199 + " y",  # 199 characters in 398 bytes: not [UNK]
    "é" * 201,  # 402 bytes, 201 characters: [UNK]
    "e\u0301" * 150,  # 300 characters before stripping, 150 after
    "ab" * 60 + "-" + "cd" * 60,  # punctuation splits a long run
    "中" * 300,  # each ideograph is its own word
    "word " * 100,
    "supercalifragilisticexpialidocious antidisestablishmentarianism",
    "pneumonoultramicroscopicsilicovolcanoconiosis" * 5,
]
