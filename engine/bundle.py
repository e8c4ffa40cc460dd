"""Model bundles: a folder with `model.onnx` (int8), `tokenizer.json` and `bundle.json`.

`load(path)` checks that the files exist, that their sha256 match what `bundle.json` records and that
the manifest is complete, and raises BundleError with a message an operator can act on otherwise. A
fine-tuned bundle that its gate rejected (`gate.accepted: false`, engine/train/gate.py) is refused too,
unless `allow_rejected` (evaluation may read it; the gateway never serves it by accident). The
default bundle ships inside the package (engine/bundles/default), so the gateway works offline.

`routing` says who routes the requests a bundle lets through: "policy" when every benign request it was
trained on carries the written labelling policy's routing label (engine/labels.py; training checks, and
then the routing head only learned that policy), "model" when its routing labels are its own (a site's
marks) or it does not say.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.errors import BundleError

DEFAULT_BUNDLE = Path(__file__).with_name("bundles") / "default"
FILES = ("model.onnx", "tokenizer.json")
CARRIED = ("weights.pt",)  # not served; recorded when present (engine/train/weights.py: what fine-tuning starts from)
ROUTING = ("policy", "model")
REQUIRED = ("name", "version", "labels", "features", "max_tokens", "window", "serialization", "sha256")


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


@dataclass(frozen=True)
class Bundle:
    path: Path
    name: str
    version: str
    labels: tuple[str, ...]
    features: tuple[str, ...]
    max_tokens: int
    window: int
    serialization: int
    manifest: dict[str, Any] = field(repr=False)

    @property
    def model_path(self) -> Path:
        return self.path / "model.onnx"

    @property
    def tokenizer_path(self) -> Path:
        return self.path / "tokenizer.json"

    @property
    def id(self) -> str:
        """`name@version`: what decisions and the cache key name the model by."""
        return f"{self.name}@{self.version}"

    @property
    def thresholds(self) -> dict[str, float]:
        return dict(self.manifest.get("thresholds", {}))

    @property
    def routing(self) -> str:
        """Who routes what the bundle lets through: "policy" or "model" (the module docstring)."""
        return str(self.manifest.get("routing", "model"))

    def info(self) -> dict[str, Any]:
        m = self.manifest
        return {
            "name": self.name,
            "version": self.version,
            "labels": list(self.labels),
            "features": list(self.features),
            "max_tokens": self.max_tokens,
            "window": self.window,
            "serialization": self.serialization,
            "routing": self.routing,
            "path": str(self.path),
            "sha256": m["sha256"].get("model.onnx", ""),
            "trained_on": m.get("trained_on", {}),
            "eval": m.get("eval", {}),
            # an ensemble served one network first (engine/train/cascade.py): which, and the cutoff that calls the rest
            **({"cascade": {k: m["cascade"][k] for k in ("first", "cutoff")}} if isinstance(m.get("cascade"), dict) else {}),
        }


def load(path: str | Path | None = None, allow_rejected: bool = False) -> Bundle:
    """Load and verify a bundle folder (None: the default bundle inside the package)."""
    folder = Path(path) if path else DEFAULT_BUNDLE
    if not folder.is_dir():
        raise BundleError(f"model bundle {folder}: not a folder")
    manifest_path = folder / "bundle.json"
    try:
        manifest = json.loads(manifest_path.read_text("utf-8"))
    except FileNotFoundError:
        raise BundleError(f"model bundle {folder}: bundle.json is missing") from None
    except (ValueError, UnicodeDecodeError) as err:
        raise BundleError(f"model bundle {folder}: bundle.json is not valid JSON ({err})") from None
    if not isinstance(manifest, dict):
        raise BundleError(f"model bundle {folder}: bundle.json must hold an object")
    missing = [k for k in REQUIRED if k not in manifest]
    if missing:
        raise BundleError(f"model bundle {folder}: bundle.json lacks {', '.join(missing)}")
    if manifest.get("routing", "model") not in ROUTING:
        raise BundleError(f"model bundle {folder}: bundle.json's routing must be policy or model, got {manifest['routing']!r}")
    gate = manifest.get("gate")
    if isinstance(gate, dict) and gate.get("accepted") is False and not allow_rejected:
        why = "; ".join(str(r) for r in gate.get("reasons") or ()) or "see gate in bundle.json"
        raise BundleError(f"model bundle {folder}: rejected by the fine-tuning gate ({why}); it is not served")
    for name in FILES:
        f = folder / name
        if not f.is_file():
            raise BundleError(f"model bundle {folder}: {name} is missing")
        want = manifest["sha256"].get(name)
        if not want:
            raise BundleError(f"model bundle {folder}: bundle.json has no sha256 for {name}")
        got = sha256_file(f)
        if got != want:
            raise BundleError(
                f"model bundle {folder}: {name} is corrupt or was replaced "
                f"(sha256 {got[:12]}…, bundle.json says {want[:12]}…)"
            )
    try:
        return Bundle(
            path=folder,
            name=str(manifest["name"]),
            version=str(manifest["version"]),
            labels=tuple(manifest["labels"]),
            features=tuple(manifest["features"]),
            max_tokens=int(manifest["max_tokens"]),
            window=int(manifest["window"]),
            serialization=int(manifest["serialization"]),
            manifest=manifest,
        )
    except (TypeError, ValueError) as err:
        raise BundleError(f"model bundle {folder}: bundle.json has a bad value ({err})") from None


def routing_of(setting: str, bundle: Bundle) -> str:
    """Who routes what the model lets through: the setting (`model.routing`: policy or model), or with "auto"
    what the bundle records."""
    return bundle.routing if setting == "auto" else setting


def write_manifest(folder: Path, manifest: dict[str, Any]) -> dict[str, Any]:
    """Record the files' sha256 in the manifest and write bundle.json (used by export)."""
    manifest = dict(manifest)
    manifest["sha256"] = {name: sha256_file(folder / name) for name in FILES}
    manifest["sha256"].update({name: sha256_file(folder / name) for name in CARRIED if (folder / name).is_file()})
    (folder / "bundle.json").write_text(json.dumps(manifest, indent=2, sort_keys=False) + "\n", "utf-8")
    return manifest
