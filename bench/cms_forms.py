"""False positives on a kind of traffic no split shows: long pages saved by a CMS as one form post.

    python bench/cms_forms.py [--data work/corpus/test.jsonl] [--bundle DIR ...] [--out bench/results]

A back office saving a page sends `title=…&body=<long HTML or markdown>&format=full_html&op=Save` to
`/admin/pages/save`, `/cms/edit` or `/node/add/article` (form-urlencoded, with a session cookie). The
test split holds out whole text sources, so the documents here are ones no bundle trained on: the longest
text field of each benign HTML, markdown or mixed post in `--data`, three documents to a page. Each
bundle decides every request as the gateway does by default (the model, then the rules on what it let
through); every request is benign, so every block is a false positive. Prints the rate per bundle, the
model's own and as served, and writes results JSON.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import urllib.parse
from urllib.parse import unquote_plus
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from engine import bundle as bundles  # noqa: E402
from engine.eval import evaluate, features_of  # noqa: E402
from engine.fields import body_fields  # noqa: E402

PATHS = ("/admin/pages/save", "/cms/edit", "/node/add/article")
BROWSERS = (
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36",
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Safari/605.1.15",
)


def longest_text(rec: dict) -> str:
    """The longest text value in a record's body (a JSON leaf or a form field, decoded), through the one
    split the canonical text and the rules use (`engine.fields`)."""
    values = [unquote_plus(f.value) if f.kind == "form" else f.value for f in body_fields(features_of(rec))
              if f.kind in ("json", "form") and isinstance(f.value, str)]  # fmt: skip
    return max(values, key=len, default="")


def documents(data: Path, min_chars: int = 200) -> list[str]:
    out = []
    with open(data, encoding="utf-8") as f:
        for line in f:
            r = json.loads(line)
            kind = r.get("gen") or ""
            if r.get("label") == "block" or not kind.startswith(("text/html", "text/markdown", "text/mixed")):
                continue
            text = longest_text(r)
            if len(text) >= min_chars:
                out.append(text)
    return out


def cms_posts(docs: list[str], n: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    docs = docs[:]
    rng.shuffle(docs)
    posts = []
    for i in range(0, min(len(docs), 3 * n), 3):
        page = "\n\n".join(docs[i : i + 3])
        body = urllib.parse.urlencode([("title", page.split("\n", 1)[0][:60]), ("body", page), ("format", "full_html"), ("op", "Save")])
        headers = [["Host", "www.example.org"], ["User-Agent", rng.choice(BROWSERS)], ["Content-Type", "application/x-www-form-urlencoded"],
                   ["Cookie", f"sessionid={rng.getrandbits(64):016x}"], ["Origin", "https://www.example.org"]]  # fmt: skip
        posts.append({"method": "POST", "path": rng.choice(PATHS), "query": "", "headers": headers, "body": body,
                      "label": "benign", "attack_class": None})  # fmt: skip
    return posts


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=str(ROOT / "work" / "corpus" / "test.jsonl"), help="held-out corpus JSONL")
    ap.add_argument("--bundle", action="append", help="bundle folder (repeatable; default: the packaged default)")
    ap.add_argument("--n", type=int, default=500, help="requests to make (fewer if the documents run out)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", default=str(ROOT / "bench" / "results"))
    args = ap.parse_args(argv)

    posts = cms_posts(documents(Path(args.data)), args.n, args.seed)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    probe = Path(args.data).parent / "cms_forms.jsonl"  # beside the corpus, never committed: it holds corpus text
    probe.write_text("".join(json.dumps(p) + "\n" for p in posts), encoding="utf-8")
    sizes = sorted(len(p["body"]) for p in posts)
    print(f"{len(posts)} CMS page saves from held-out documents in {args.data}; body median {sizes[len(sizes) // 2]:,} bytes")
    rows = []
    for path in args.bundle or [str(bundles.DEFAULT_BUNDLE)]:
        res = evaluate(path, probe, rules=True)
        row = {"bundle": res["bundle"], "requests": res["records"], "model_fpr": res["model"]["fpr"], "served_fpr": res["fpr"],
               "tokens_p50": res["tokens_p50"]}  # fmt: skip
        rows.append(row)
        print(f"  {row['bundle']:28s} blocked: model alone {100 * row['model_fpr']:6.2f} %   served {100 * row['served_fpr']:6.2f} %")
    (out / "cms_forms.json").write_text(json.dumps({"data": args.data, "seed": args.seed, "results": rows}, indent=2) + "\n")
    print(f"results: {out / 'cms_forms.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
