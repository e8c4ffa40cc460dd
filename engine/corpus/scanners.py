"""Scanner probes made from the shared keyword lists, for a class the payload lists cover thinly.

- `scanner_ua`: ordinary requests sent by attack tools that announce themselves in the User-Agent
  (crs_scanners-user-agents: nikto, sqlmap, nuclei, wpscan, ...), written as those tools write it;
- `restricted_file`: requests for files a site must never serve (crs_restricted-files: .env, .git/config,
  wp-config.php backups, SQL dumps, cloud credentials).

The lists are substrings, not requests: each entry is completed into a realistic User-Agent or path.
Each entry is one group, so whole entries are held out for the test split.
"""

from __future__ import annotations

import re
from typing import Iterator

from engine.corpus import session
from engine.corpus.io import from_draft
from engine.corpus.rand import Rng
from engine.corpus.scenes import Ctx, all_scenes, start
from engine.corpus.split import choose_test

TARGETS = {"scanner_ua": 1500, "restricted_file": 2000}
# folders a restricted file is probed under; benign requests under these are made with --mounts (scenes_site.mounted)
PREFIXES = ("/", "/", "/", "/app/", "/public/", "/wordpress/", "/api/", "/static/../")
_BENIGN = re.compile(r"^(robots\.txt|sitemap|manifest\.json|favicon|\.well-known|humans\.txt|ads\.txt|security\.txt)", re.I)


def tool_agent(rng: Rng, tool: str) -> str:
    if tool.lower().startswith("mozilla"):
        return tool if tool.endswith(")") else tool + rng.pick([")", " 1.0)", f" {rng.randrange(1, 9)}.{rng.randrange(10)})"])
    ver = f"{rng.randrange(1, 9)}.{rng.randrange(0, 20)}.{rng.randrange(0, 10)}"
    return rng.call(lambda: f"{tool}/{ver}", lambda: f"Mozilla/5.0 (compatible; {tool}/{ver})", lambda: tool,
                    lambda: f"Mozilla/5.00 ({tool}/{ver}) (Evasions:None) (Test:{rng.randrange(1, 999999):06d})",
                    lambda: f"{tool} v{ver} (https://github.com/{tool.lower().replace(' ', '')})")  # fmt: skip


def file_path(rng: Rng, entry: str) -> str:
    e = entry.strip()
    if e.startswith((".sql", ".tar", ".zip", ".bak", ".old", ".gz")):
        e = rng.pick(["backup", "dump", "db", "site", "www", "database"]) + e
    if e.endswith(("-", "_")):
        e += rng.pick(["backup.php", "old.php", "1.php", "bak", "sample.php"])
    prefix = rng.pick(PREFIXES) if not e.startswith("/") else ""
    return prefix + e


def entries(keywords: dict[str, list[str]]) -> dict[str, list[tuple[str, str]]]:
    """kind → [(group, entry)] usable entries of each list."""
    agents = [(f"scanner:ua:{t.lower()}", t) for t in keywords.get("crs_scanners-user-agents", [])]
    files = [(f"scanner:file:{e.lower()}", e) for e in keywords.get("crs_restricted-files", []) if e.strip() and not _BENIGN.match(e.lstrip("/"))]
    return {"scanner_ua": agents, "restricted_file": files}


def split_entries(keywords: dict[str, list[str]]) -> dict[str, dict[str, list[tuple[str, str]]]]:
    out: dict[str, dict[str, list[tuple[str, str]]]] = {"train": {}, "test": {}}
    for kind, items in entries(keywords).items():
        test = choose_test({g: 1 for g, _ in items})
        for g, e in items:
            out["test" if g in test else "train"].setdefault(kind, []).append((g, e))
    return out


def generate(rng: Rng, pools, split: str, items: dict[str, list[tuple[str, str]]], scale: float) -> Iterator[dict]:
    share = 0.16 if split == "test" else 1.0
    for kind, n in TARGETS.items():
        pool = items.get(kind, [])
        for i in range(round(n * scale * share) if pool else 0):
            group, entry = pool[i % len(pool)] if i < len(pool) else rng.pick(pool)
            ctx = Ctx(rng.child(), pools, split)
            if kind == "scanner_ua":
                sc = all_scenes()[ctx.rng.pick(["page", "static", "search", "api_read", "crawler", "form_post"])]
                d = sc.make(ctx, ctx.rng.pick(sc.usable(split)))
                session.dress(ctx.rng, d, pools.tokens)
                d.set_header("User-Agent", tool_agent(ctx.rng, entry))
            else:
                d = start(ctx, "HEAD" if ctx.rng.chance(0.1) else "GET", file_path(ctx.rng, entry), ctx.rng.pick(["navigate", "api", "bot"]))
                session.dress(ctx.rng, d, pools.tokens)
            yield from_draft(d, "scanner", source="crs-keywords", group=group, gen=f"scanner/{kind}", split=split)
