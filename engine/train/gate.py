"""The gate a fine-tuned bundle must pass before anything may serve it.

Both bundles, the base and the candidate, decide the same requests (canonical text computed once):

- the base corpus's held-out split (or a sample of it): attack TPR may drop by at most `max_tpr_drop`
  (0.002: 0.2 point). Fine-tuning on one site's traffic must not make the model forget attacks.
- the site's marked examples held out from fine-tuning: its false positives (benign marks the bundle
  blocks) must fall, and its missed attacks (block marks it lets through) must not rise. When the base
  made no false positive there, none is allowed. The report also counts the benign marks the rules
  block on their own: with the ensemble on (rules.ensemble) their block stands whatever the model says,
  so those need an operator override, not retraining.

`check()` returns the report that goes into the candidate's bundle.json (`gate`) and `table()` prints it.
A rejected bundle is marked so (`gate.accepted: false`) and engine.bundle.load refuses to serve it.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from engine.bundle import Bundle
from engine.eval import features_of, metrics, predict
from engine.features import Features
from engine.model import Model
from engine.train.calibrate import rules_blocks


def _site(records: list[dict], feats: list[Features], model: Model) -> dict[str, int]:
    verdicts, _, _ = predict(model, feats)
    return {
        "false_positives": sum(r["label"] != "block" and v.blocked for r, v in zip(records, verdicts)),
        "missed_attacks": sum(r["label"] == "block" and not v.blocked for r, v in zip(records, verdicts)),
    }


def check(base: Bundle, candidate: Bundle, held_out: list[dict], held_out_name: str, site: list[dict],
          site_held_out: bool, max_tpr_drop: float = 0.002) -> dict[str, Any]:  # fmt: skip
    old, new = Model(base), Model(candidate)
    feats = [features_of(r) for r in held_out]
    before, after = (metrics(held_out, feats, predict(m, feats)[0]) for m in (old, new))
    site_feats = [features_of(r) for r in site]
    site_before, site_after = _site(site, site_feats, old), _site(site, site_feats, new)
    ruled = rules_blocks(site) if site else []
    drop = before["tpr"] - after["tpr"]
    reasons = []
    if drop > max_tpr_drop + 1e-12:
        reasons.append(f"held-out attack TPR fell by {100 * drop:.2f} points (at most {100 * max_tpr_drop:.2f})")
    fp0, fp1 = site_before["false_positives"], site_after["false_positives"]
    if fp1 > 0 and fp1 >= fp0:
        reasons.append(f"the site's false positives did not fall ({fp0} → {fp1})")
    missed0, missed1 = site_before["missed_attacks"], site_after["missed_attacks"]
    if missed1 > missed0:
        reasons.append(f"the site's missed attacks rose ({missed0} → {missed1})")
    keep = ("records", "attacks", "benign", "tpr", "fpr", "per_class")
    return {
        "accepted": not reasons,
        "reasons": reasons,
        "base": base.id,
        "candidate": candidate.id,
        "checked_at": datetime.now(timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z"),
        "held_out": {"data": held_out_name, "base": {k: before[k] for k in keep},
                     "candidate": {k: after[k] for k in keep}, "tpr_drop": round(drop, 5),
                     "max_tpr_drop": max_tpr_drop},  # fmt: skip
        "site": {"records": len(site), "benign": sum(r["label"] != "block" for r in site),
                 "attacks": sum(r["label"] == "block" for r in site), "held_out": site_held_out,
                 "rules_block": int(sum(r["label"] != "block" and b for r, b in zip(site, ruled))),
                 "base": site_before, "candidate": site_after},  # fmt: skip
    }


def table(report: dict[str, Any]) -> str:
    h, s = report["held_out"], report["site"]
    b, c = h["base"], h["candidate"]
    verdict = "ACCEPTED" if report["accepted"] else "REJECTED: " + "; ".join(report["reasons"])
    how = "held out from fine-tuning" if s["held_out"] else "also trained on: too few marks to hold any out"
    return "\n".join([
        f"gate: {verdict}",
        f"  {report['base']} → {report['candidate']}",
        f"  held-out {h['data']}: {b['records']:,} requests ({b['attacks']:,} attacks, {b['benign']:,} benign)",
        f"    attack TPR {100 * b['tpr']:.2f} % → {100 * c['tpr']:.2f} %  (drop {100 * h['tpr_drop']:.2f} points, "
        f"at most {100 * h['max_tpr_drop']:.2f})   benign FPR {100 * b['fpr']:.2f} % → {100 * c['fpr']:.2f} %",
        f"  site: {s['records']} marked requests ({s['benign']} benign, {s['attacks']} attacks; {how})",
        f"    false positives {s['base']['false_positives']} → {s['candidate']['false_positives']}   "
        f"missed attacks {s['base']['missed_attacks']} → {s['candidate']['missed_attacks']}",
        *([f"    note: the rules block {s['rules_block']} of the benign ones themselves; with rules.ensemble on their "
           "block stands: add an override (rules.overrides) for those"] if s.get("rules_block") else []),
    ])  # fmt: skip
