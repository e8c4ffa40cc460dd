"""bench/uploads.py: real files uploaded as a browser posts them, and the same files with a payload planted."""

from __future__ import annotations

import importlib.util
import json
import struct
import subprocess
import sys
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
XMP = (b'<?xpacket begin="\xef\xbb\xbf" id="W5M0MpCehiHzreSzNTczkc9d"?><x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF '
       b'xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#"><rdf:Description rdf:about="" '
       b'xmlns:exif="http://ns.adobe.com/exif/1.0/"><exif:UserComment>Screenshot</exif:UserComment></rdf:Description>'
       b'</rdf:RDF></x:xmpmeta><?xpacket end="w"?>')  # fmt: skip


def chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def png(side: int, xmp: bool = False) -> bytes:
    pixels = zlib.compress(b"".join(b"\x00" + bytes((x * 7 + y * 3) % 256 for x in range(side * 3)) for y in range(side)))
    meta = chunk(b"iTXt", b"XML:com.adobe.xmp\x00\x00\x00\x00\x00" + XMP) if xmp else b""
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", side, side, 8, 2, 0, 0, 0)) + meta + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")


def test_files_are_uploaded_and_planted_payloads_reported(tmp_path):
    files = tmp_path / "files"
    (files / "icons").mkdir(parents=True)
    (files / "icons" / "a.png").write_bytes(png(16))
    (files / "icons" / "shot.png").write_bytes(png(24, xmp=True))
    (files / "icons" / "b.svg").write_text('<svg xmlns="http://www.w3.org/2000/svg" width="16" height="16"><circle cx="8" cy="8" r="6"/></svg>')
    (files / "doc.pdf").write_bytes(b"%PDF-1.4\n1 0 obj\n<< /Type /Catalog /Pages 2 0 R >>\nendobj\ntrailer\n<< /Root 1 0 R >>\n%%EOF\n")
    (files / "notes.txt").write_text("not an upload kind")
    out = tmp_path / "out"
    run = subprocess.run([sys.executable, str(ROOT / "bench" / "uploads.py"), "--root", str(files), "--per-type", "5",
                          "--out", str(out), "--threads", "1"], capture_output=True, text=True, timeout=600)  # fmt: skip
    assert run.returncode == 0, run.stderr
    res = json.loads((out / "uploads.json").read_text())
    assert res["files"] == 4 and {Path(f["path"]).name for f in res["file_list"]} == {"a.png", "shot.png", "b.svg", "doc.pdf"}
    assert set(res["benign"]) == {"png", "png (XMP)", "svg", "pdf"}
    # three payloads for each image or PDF, one for the SVG
    assert {k: v["n"] for k, v in res["planted"].items()} == {"php-appended": 3, "xmp-xss": 3, "xmp-sqli": 3, "svg-handler": 1}
    for row in list(res["benign"].values()) + list(res["planted"].values()):
        assert 0 <= row["model"] <= row["served"] <= row["n"] and row["rules"] <= row["n"]
    assert res["planted"]["php-appended"]["served"] == 3  # a web shell appended to a file is read and blocked
    assert res["benign"]["png (XMP)"]["model"] == 0  # its metadata read as values, not as XML
    assert "benign files" in run.stdout and "with a payload planted" in run.stdout
    if importlib.util.find_spec("matplotlib") is None:
        assert not (out / "uploads.png").exists()
