"""The fortunes text (Debian's `fortunes` package) the tokenizer tests train and check on."""

import os
import string

FORTUNES = "/usr/share/games/fortunes"


def fortunes(names):
    """The fortunes of the named files, one string each (UTF-8 decoded, undecodable bytes dropped)."""
    out = []
    for name in names:
        with open(os.path.join(FORTUNES, name), "rb") as f:
            text = f.read().decode("utf-8", errors="ignore")
        out.extend(part.strip("\n") for part in text.split("\n%\n") if part.strip())
    return out


def printable_ascii(texts):
    """Only the texts made of printable ASCII, tabs and newlines (where Python's re and PCRE2 agree)."""
    allowed = set(string.ascii_letters + string.digits + string.punctuation + " \t\n")
    return [t for t in texts if t and set(t) <= allowed]


# Texts every encoder must survive: whitespace runs, newlines, digits, non-ASCII, emoji, markers.
EDGE_CASES = [
    "", " ", "  ", "a", " a", "a ", "a  b", "a   b   c", "   leading", "trailing   ", "\n", "\n\n", "a\nb",
    "a\n\n\nb", "tab\tseparated\tvalues", " \t \n ", "1", "12", "123", "1234", "12345678901234567890",
    "3.14159 and 2,718", "I'm you're he'll we've they'd it's DON'T", "naïve café déjà vu",
    "Ünïcödé ßtraße", "日本語のテキスト", "Привет, мир", "emoji 🙂 and 👍🏽 and 🇫🇷",
    "<s> literal </s> <unk>", "<|eot|> marker", "mixed 中文 and English 123 !!!", "!!!???...",
    "line one\r\nline two\r\n", "x" * 300, " " * 50, "ab" * 100,
]
