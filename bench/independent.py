"""False positives on real text that nothing in the project trained or tuned on.

    python bench/independent.py [--bundle DIR] [--docs 400] [--seed 1] [--out bench/results]

The corpus's benign text comes from documentation repositories (`../shared/data/benign_text.jsonl`). This
benchmark reads text from three sources set aside for independent evaluation, which no corpus build,
training run or rule reads:

    debian-doc  package documentation on this machine: /usr/share/doc/*/ READMEs, NEWS, changelogs,
                *.txt and *.md (gzip too)
    man         manual pages, sections 1, 5 and 8, rendered to plain text by man(1)
    pypi        Python package descriptions: the long description of every installed distribution

Each document gives up to six passages of 200 to 4,000 characters (whole paragraphs) and, for one
document in four, the whole document up to 60,000 characters. Each passage travels the way such text reaches a site: a
comment form post, a JSON article saved through an API, a plain-text upload (multipart), and its first
line as a search query. Every request is benign, so every block is a false positive.

Each request is decided as the gateway decides by default: the model, then the rules on what it let
through (engine.eval's predict and with_rules). Prints the false-positive rate of the model alone and as
served, by source, by carrier and by length, and the rules behind the served blocks; writes results JSON
and a PNG chart. It prints no request text: these sources stay an evaluation set, not a tuning set. The
probe requests are written under work/ (never committed).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import re
import subprocess
import sys
import time
import urllib.parse
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.plotting import pyplot  # noqa: E402
from engine import bundle as bundles  # noqa: E402
from engine.eval import features_of, predict, with_rules  # noqa: E402
from engine.model import Model  # noqa: E402
from engine.verdict import Source  # noqa: E402
from rules import RuleEngine  # noqa: E402

DOC_NAMES = re.compile(r"^(?:README|NEWS|CHANGES|changelog|AUTHORS|TODO|FAQ|HISTORY|USAGE|.*\.(?:txt|md|rst))(?:\.gz)?$", re.I)
MAN_SECTIONS = ("man1", "man5", "man8")
BROWSER = "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0"
MAX_PASSAGES = 6  # per document
LENGTHS = ((0, 1000, "< 1 KB"), (1000, 4000, "1–4 KB"), (4000, 16000, "4–16 KB"), (16000, 1 << 30, "> 16 KB"))


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def read_text(path: Path, limit: int = 200_000) -> str:
    try:
        raw = gzip.open(path).read(limit) if path.suffix == ".gz" else path.read_bytes()[:limit]
        text = raw.decode("utf-8")
    except (OSError, UnicodeDecodeError, EOFError):
        return ""
    printable = sum(ch.isprintable() or ch in "\n\t" for ch in text)
    return text if text and printable / len(text) > 0.97 else ""


def debian_docs(rng: random.Random, n: int) -> list[str]:
    files = sorted(p for p in Path("/usr/share/doc").glob("*/*") if p.is_file() and DOC_NAMES.match(p.name))
    rng.shuffle(files)
    return [t for t in (read_text(p) for p in files[: n * 2]) if len(t) >= 200][:n]


def man_page(path: Path) -> str:
    env = {**os.environ, "MANWIDTH": "100", "LC_ALL": "C.UTF-8"}
    try:
        out = subprocess.run(["man", "-l", "-P", "cat", str(path)], capture_output=True, env=env, timeout=20).stdout
        text = subprocess.run(["col", "-bx"], input=out, capture_output=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return ""
    return text.decode("utf-8", "replace")


def man_pages(rng: random.Random, n: int) -> list[str]:
    files = sorted(p for s in MAN_SECTIONS for p in Path("/usr/share/man", s).glob("*.gz"))
    rng.shuffle(files)
    with ThreadPoolExecutor(2) as pool:
        texts = list(pool.map(man_page, files[:n]))
    return [t for t in texts if len(t) >= 200]


def pypi_descriptions(n: int) -> list[str]:
    import importlib.metadata as md

    seen, out = set(), []
    paths = [p for p in sys.path if p and Path(p).is_dir()] + ["/usr/lib/python3/dist-packages"]
    for dist in md.distributions(path=paths):
        name = (dist.metadata.get("Name") or "").lower()
        body = dist.metadata.get_payload() or dist.metadata.get("Description") or ""
        if name and name not in seen and len(body) >= 200:
            seen.add(name)
            out.append(body)
    return out[:n]


def passages(text: str, rng: random.Random) -> list[str]:
    """Whole paragraphs grouped into passages of 200 to 4,000 characters; one document in four also whole."""
    paras = [p.strip() for p in re.split(r"\n\s*\n", text) if p.strip()]
    out, cur, target = [], "", rng.randint(200, 4000)
    for p in paras:
        cur = f"{cur}\n\n{p}" if cur else p
        if len(cur) >= target:
            out.append(cur[:8000])
            cur, target = "", rng.randint(200, 4000)
    if len(cur) >= 200:
        out.append(cur)
    if len(out) > MAX_PASSAGES:  # a long changelog must not outweigh a hundred short READMEs
        out = rng.sample(out, MAX_PASSAGES)
    if rng.random() < 0.25 and len(text) > 4000:
        out.append(text[:60_000])
    return out


def carriers(text: str, rng: random.Random) -> list[tuple[str, dict]]:
    title = next((ln.strip() for ln in text.splitlines() if ln.strip()), "notes")[:80]
    session = f"sessionid={rng.getrandbits(64):016x}; theme=light"
    base = [["Host", "www.example.org"], ["User-Agent", BROWSER], ["Accept-Language", "en-GB,en;q=0.8"]]
    form = urllib.parse.urlencode([("title", title), ("body", text), ("csrf_token", f"{rng.getrandbits(96):024x}")])
    article = json.dumps({"title": title, "content": text, "tags": ["docs"], "draft": False})
    boundary = f"----form{rng.getrandbits(48):012x}"
    upload = (f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="notes.txt"\r\n'
              f"Content-Type: text/plain\r\n\r\n{text}\r\n--{boundary}--\r\n")  # fmt: skip
    return [
        ("form", {"method": "POST", "path": "/comments", "query": "", "body": form,
                  "headers": base + [["Content-Type", "application/x-www-form-urlencoded"], ["Cookie", session]]}),
        ("json", {"method": "PUT", "path": f"/api/articles/{rng.randint(1, 99999)}", "query": "", "body": article,
                  "headers": base + [["Content-Type", "application/json"], ["Authorization", f"Bearer {rng.getrandbits(128):032x}"]]}),
        ("upload", {"method": "POST", "path": "/api/files", "query": "", "body": upload,
                    "headers": base + [["Content-Type", f"multipart/form-data; boundary={boundary}"], ["Cookie", session]]}),
        ("search", {"method": "GET", "path": "/search", "query": urllib.parse.urlencode({"q": title}), "body": "",
                    "headers": base}),
    ]  # fmt: skip


def build(docs_per_source: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    t0 = time.time()
    sources = {
        "debian-doc": debian_docs(random.Random(seed), docs_per_source),
        "man": man_pages(random.Random(seed + 1), docs_per_source),
        "pypi": pypi_descriptions(docs_per_source),
    }
    log(f"  read {', '.join(f'{len(v)} {k}' for k, v in sources.items())} documents ({time.time() - t0:.0f} s)")
    records = []
    for source, texts in sources.items():
        for text in texts:
            for i, passage in enumerate(passages(text, rng)):
                for carrier, req in carriers(passage, rng):
                    if carrier == "search" and i > 0:
                        continue  # one search (the passage's first line) per document: short queries repeat
                    records.append({**req, "label": "benign", "attack_class": None, "source": source, "carrier": carrier,
                                    "chars": len(passage) if carrier != "search" else len(req["query"])})  # fmt: skip
    return records


def decide(bundle: str | None, records: list[dict]) -> tuple[list, str, str]:
    model = Model(bundles.load(bundle), threads=2)
    feats = [features_of(r) for r in records]
    t0 = time.time()
    verdicts, _, _ = predict(model, feats, progress=log)
    log(f"  model: {len(feats):,} requests in {time.time() - t0:.0f} s")
    rules = RuleEngine.load()
    served = with_rules(verdicts, feats, rules)
    reasons = [rules.scan(f).rules if v.blocked and v.source is Source.RULES else () for v, f in zip(served, feats)]
    return [(m.blocked, s.blocked, why) for m, s, why in zip(verdicts, served, reasons)], model.id, rules.model


def bucket(chars: int) -> str:
    return next(name for lo, hi, name in LENGTHS if lo <= chars < hi)


def summarise(records: list[dict], outcomes: list) -> dict:
    groups: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(lambda: [0, 0, 0]))  # key -> [n, model, served]
    fired: Counter = Counter()
    for rec, (m, s, why) in zip(records, outcomes):
        for dim, key in (("all", "all"), ("source", rec["source"]), ("carrier", rec["carrier"]), ("length", bucket(rec["chars"]))):
            g = groups[dim][key]
            g[0] += 1
            g[1] += m
            g[2] += s
        fired.update(why)
    rate = lambda k, n: round(k / n, 5) if n else None  # noqa: E731
    order = {name: i for i, (_, _, name) in enumerate(LENGTHS)}  # lengths in size order, the rest by name
    return {
        dim: {key: {"n": n, "model_fpr": rate(mb, n), "served_fpr": rate(sb, n), "model_blocked": mb, "served_blocked": sb}
              for key, (n, mb, sb) in sorted(keys.items(), key=lambda kv: (order.get(kv[0], 0), kv[0]))}
        for dim, keys in groups.items()
    } | {"rules_behind_served_blocks": dict(fired.most_common(15))}  # fmt: skip


def chart(summary: dict, path: Path, title: str) -> None:
    plt = pyplot()
    if plt is None:
        return

    rows = [(f"{dim}: {key}", v) for dim in ("source", "carrier", "length") for key, v in summary[dim].items()]
    fig, ax = plt.subplots(figsize=(9, 0.38 * len(rows) + 1.2))
    ys = range(len(rows))
    ax.barh([y + 0.2 for y in ys], [100 * v["model_fpr"] for _, v in rows], height=0.4, label="model alone")
    ax.barh([y - 0.2 for y in ys], [100 * v["served_fpr"] for _, v in rows], height=0.4, label="served (model + rules)")
    ax.set_yticks(list(ys), [f"{name} (n={v['n']:,})" for name, v in rows])
    ax.invert_yaxis()
    ax.set_xlabel("benign requests blocked (%)")
    ax.set_title(title, fontsize=10)
    ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bundle", default=None, help="bundle folder (default: the packaged default)")
    ap.add_argument("--docs", type=int, default=400, help="documents to read per source, at most")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", default=str(ROOT / "bench" / "results"))
    args = ap.parse_args(argv)

    log("building requests from documentation, manual pages and package descriptions")
    records = build(args.docs, args.seed)
    probe = ROOT / "work" / "independent.jsonl"  # never committed: it holds the reserved text
    probe.parent.mkdir(parents=True, exist_ok=True)
    probe.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    log(f"  {len(records):,} benign requests -> {probe}")
    outcomes, model_id, rules_id = decide(args.bundle, records)
    summary = summarise(records, outcomes)

    print(f"{len(records):,} benign requests carrying independent text; {model_id}, {rules_id}")
    print(f"{'':24}{'n':>8}{'model':>10}{'served':>10}")
    for dim in ("all", "source", "carrier", "length"):
        for key, v in summary[dim].items():
            print(f"{dim + ': ' + key:24}{v['n']:>8,}{100 * v['model_fpr']:>9.3f}%{100 * v['served_fpr']:>9.3f}%")
    print("rules behind served blocks:", ", ".join(f"{k} {v}" for k, v in summary["rules_behind_served_blocks"].items()) or "none")

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    result = {"model": model_id, "rules": rules_id, "seed": args.seed, "docs_per_source": args.docs, "requests": len(records), **summary}
    (out / "independent.json").write_text(json.dumps(result, indent=2) + "\n")
    chart(summary, out / "independent_fpr.png", f"False positives on independent text: {model_id}, {rules_id}")
    print(f"results: {out / 'independent.json'}, {out / 'independent_fpr.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
