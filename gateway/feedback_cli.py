"""`clef-gateway feedback ...` and `clef-gateway train ...`: from journaled decisions to a new bundle.

    clef-gateway feedback list [--label block] [--feature sqli] [--path-prefix /x] [--since 2h]
                               [--marked | --unmarked] [--limit N]
    clef-gateway feedback mark ID [ID ...] (--correct | --label LABEL)
    clef-gateway feedback import FILE.jsonl       {"id", "label"} lines, or request records with a label
    clef-gateway feedback export FILE.jsonl       marked examples in the corpus record schema
    clef-gateway train --from-bundle default|DIR --feedback JOURNAL --out DIR [--corpus DIR] [--minutes N]

The journal is `--journal FILE`, else the `journal.path` of the config (`--config FILE`, CLEF_CONFIG,
CLEF_JOURNAL_PATH). Exit codes: 0 done, 1 some ids unknown or a line wrong (nothing written then),
2 no journal or a config error. `train` is engine/train/finetune.py (needs the `train` extra); its exit
code is 1 when the gate rejected the bundle.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from engine.journal import Journal, JournalError
from engine.verdict import LABELS
from gateway import config as configs
from gateway.admin_journal import iso, parse_since
from gateway.errors import ConfigError


def add_commands(sub: Any) -> None:
    fb = sub.add_parser("feedback", help="review journaled decisions, mark what they should have been")
    actions = fb.add_subparsers(dest="action", required=True, metavar="ACTION")
    ls = actions.add_parser("list", help="journaled decisions, newest first")
    ls.add_argument("--label", choices=LABELS, help="decided this label")
    ls.add_argument("--feature", help="with this feature tag (sqli, xss, ...)")
    ls.add_argument("--path-prefix", metavar="PREFIX")
    ls.add_argument("--since", metavar="WHEN", help="a time (2024-05-01T12:00) or an age (30m, 2h, 7d)")
    which = ls.add_mutually_exclusive_group()
    which.add_argument("--marked", action="store_const", const=True, dest="marked")
    which.add_argument("--unmarked", action="store_const", const=False, dest="marked")
    ls.add_argument("--limit", type=int, default=20, metavar="N")
    ls.add_argument("--json", action="store_true", help="JSON lines instead of the table")
    mark = actions.add_parser("mark", help="give journaled decisions the label they deserved")
    mark.add_argument("ids", nargs="+", metavar="ID")
    how = mark.add_mutually_exclusive_group(required=True)
    how.add_argument("--correct", action="store_true", help="the decision was right")
    how.add_argument("--label", choices=LABELS, help="the label it should have had")
    imp = actions.add_parser("import", help="marks or labelled requests from a JSONL file")
    imp.add_argument("file", metavar="FILE")
    exp = actions.add_parser("export", help="marked examples as corpus records (JSONL)")
    exp.add_argument("file", metavar="FILE")
    for p in (ls, mark, imp, exp):
        p.add_argument("--journal", metavar="FILE", help="the journal (default: journal.path of the config)")
        p.add_argument("--config", metavar="FILE", help="YAML config (default: $CLEF_CONFIG)")
        p.set_defaults(run=cmd_feedback)

    from engine.train import finetune  # argparse only at import: no torch until it runs

    train = sub.add_parser("train", help="fine-tune a bundle on the journal's marked examples, gated")
    finetune.add_arguments(train)
    train.set_defaults(run=cmd_train)


def cmd_train(args: argparse.Namespace) -> int:
    try:
        from engine.train import finetune
        import torch  # noqa: F401  (said once, clearly, rather than deep in the run)
    except ImportError:
        print("clef-gateway train: needs the train extra: pip install 'clef-gateway[train]'", file=sys.stderr)
        return 2
    return finetune.run(args)


def _settings(args: argparse.Namespace) -> tuple[str, tuple[str, ...]]:
    config = configs.load(args.config or os.environ.get("CLEF_CONFIG") or None)  # ConfigError: exit 2 in main
    path = args.journal or config.journal.path
    if not path:
        raise ConfigError("journal.path: no journal (pass --journal FILE, or a --config that sets journal.path)")
    return path, config.journal.settings().redact_fields


def cmd_feedback(args: argparse.Namespace) -> int:
    path, fields = _settings(args)
    try:
        with Journal(path, create=args.action == "import") as j:
            return ACTIONS[args.action](j, args, fields)
    except JournalError as err:
        print(f"clef-gateway feedback: {err}", file=sys.stderr)
        return 2


def _list(j: Journal, args: argparse.Namespace, fields: tuple[str, ...]) -> int:
    try:
        since = parse_since(args.since) if args.since else None
    except ValueError as err:
        print(f"clef-gateway feedback: {err}", file=sys.stderr)
        return 2
    rows = j.entries(label=args.label, feature=args.feature, path_prefix=args.path_prefix, since=since,
                     marked=args.marked, limit=args.limit)  # fmt: skip
    if args.json:
        for r in rows:
            r["time"] = iso(r.pop("ts"))
            print(json.dumps(r))
        return 0
    print(table(rows))
    return 0


def table(rows: list[dict]) -> str:
    """One line per entry, for a terminal: the canonical text's first line stands for the request."""
    head = f"{'ID':<20} {'TIME (UTC)':<20} {'METHOD':<7} {'PATH':<32} {'DECISION':<8} {'CONF':>5} {'FEATURES':<20} " \
           f"{'SHADOW':<7} MARKED"  # fmt: skip
    lines = [head]
    for r in rows:
        path = r["path"] if len(r["path"]) <= 32 else r["path"][:31] + "…"
        conf = f"{r['confidence']:.2f}" if r["confidence"] is not None else "-"
        lines.append(f"{r['id']:<20} {iso(r['ts'])[:19]:<20} {r['method']:<7} {path:<32} {r['label'] or '-':<8} "
                     f"{conf:>5} {','.join(r['features']) or '-':<20} {r['shadow_label'] or '-':<7} "
                     f"{r['marked'] or '-'}")  # fmt: skip
    lines.append(f"({len(rows)} shown)")
    return "\n".join(lines)


def _mark(j: Journal, args: argparse.Namespace, fields: tuple[str, ...]) -> int:
    try:
        done = j.mark(args.ids, None if args.correct else args.label)
    except KeyError as err:
        print(f"clef-gateway feedback: not in the journal (or nothing to confirm): {err.args[0]}; none marked",
              file=sys.stderr)  # fmt: skip
        return 1
    for id, label in done.items():
        print(f"{id} marked {label}")
        entry = j.get(id)
        if label != "block" and entry["label"] == "block" and entry["source"] in ("rules", "override"):
            print(f"  note: the {entry['source']} blocked {id}, not the model: retraining will not change that; "
                  "an override (rules.overrides) will", file=sys.stderr)  # fmt: skip
    return 0


def _import(j: Journal, args: argparse.Namespace, fields: tuple[str, ...]) -> int:
    from engine.feedback import import_lines

    with open(args.file, encoding="utf-8") as f:
        result = import_lines(j, f, fields)
    for err in result["errors"]:
        print(f"clef-gateway feedback: {args.file}: {err}", file=sys.stderr)
    if result["errors"]:
        print("clef-gateway feedback: nothing imported", file=sys.stderr)
        return 1
    print(f"{result['marked']} marked, {result['added']} added")
    return 0


def _export(j: Journal, args: argparse.Namespace, fields: tuple[str, ...]) -> int:
    from engine.corpus.io import dumps
    from engine.feedback import export

    records = export(j)
    with open(args.file, "w", encoding="utf-8") as f:
        for rec in records:
            f.write(dumps(rec) + "\n")
    print(f"{len(records)} marked examples → {args.file}")
    return 0


ACTIONS = {"list": _list, "mark": _mark, "import": _import, "export": _export}
