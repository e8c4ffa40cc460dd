"""engine/corpus/images.py: benign image files are well formed, hold nothing that runs, and read as uploads."""

from __future__ import annotations

import re
import struct
import xml.etree.ElementTree as ET
import zlib

import pytest

from engine.corpus import images
from engine.corpus.pools import Pools
from engine.corpus.rand import Rng
from engine.corpus.scenes import Ctx
from engine.corpus.scenes_forms import IMAGE_FORMATS, file_part
from engine.features import Features

SEEDS = range(300)
ACTIVE = re.compile(rb"<script|\son\w+\s*=|javascript:|<foreignObject|<iframe|<!ENTITY|<\?php", re.I)


def upload(name: str, ctype: str, data: bytes) -> Features:
    body = (b'--b\r\nContent-Disposition: form-data; name="file"; filename="' + name.encode() + b'"\r\nContent-Type: '
            + ctype.encode() + b"\r\n\r\n" + data + b"\r\n--b--\r\n")  # fmt: skip
    return Features.build("POST", "/upload", headers={"Content-Type": "multipart/form-data; boundary=b"}, body=body)


def png_chunks(data: bytes) -> list[bytes]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    at, kinds = 8, []
    while at < len(data):
        (n,) = struct.unpack(">I", data[at : at + 4])
        kind, payload = data[at + 4 : at + 8], data[at + 8 : at + 8 + n]
        assert struct.unpack(">I", data[at + 8 + n : at + 12 + n])[0] == zlib.crc32(kind + payload)
        kinds.append(kind)
        at += 12 + n
    return kinds


def test_svgs_are_well_formed_and_inert():
    shapes = set()
    for i in SEEDS:
        data = images.svg(Rng("svg", i))
        root = ET.fromstring(data)  # namespaces declared, text escaped
        assert root.tag == "{http://www.w3.org/2000/svg}svg"
        assert not ACTIVE.search(data), data[:200]
        shapes |= {el.tag.rsplit("}", 1)[-1] for el in root.iter()}
    assert {"path", "g", "linearGradient", "use", "text", "metadata", "style"} <= shapes  # the variety editors write


def test_pngs_have_valid_chunks_and_some_carry_text_and_xmp():
    kinds = [png_chunks(images.png(Rng("png", i), 500)) for i in SEEDS]
    assert all(k[0] == b"IHDR" and k[-1] == b"IEND" and b"IDAT" in k for k in kinds)
    assert any(b"tEXt" in k for k in kinds) and any(b"iTXt" in k for k in kinds)


def test_xmp_packets_parse():
    for i in range(50):
        packet = images.xmp_packet(Rng("xmp", i))
        xml = packet[packet.index(b"<x:xmpmeta") : packet.index(b"</x:xmpmeta>") + len(b"</x:xmpmeta>")]
        ET.fromstring(xml)


def test_icos_gifs_and_jpegs_are_laid_out_as_their_formats_say():
    for i in SEEDS:
        ico = images.ico(Rng("ico", i))
        reserved, kind, count = struct.unpack("<HHH", ico[:6])
        assert (reserved, kind) == (0, 1) and 1 <= count <= 4
        end = 0
        for k in range(count):
            *_, size, offset = struct.unpack("<BBBBHHII", ico[6 + 16 * k : 22 + 16 * k])
            end = max(end, offset + size)
        assert end == len(ico)
        gif = images.gif(Rng("gif", i), 800)
        assert gif[:6] in (b"GIF89a", b"GIF87a") and gif.endswith(b";")
        jpeg = images.jpeg(Rng("jpeg", i), 800)
        assert jpeg[:2] == b"\xff\xd8" and jpeg.endswith(b"\xff\xd9")


@pytest.mark.parametrize("make,name,ctype,read", [
    (lambda r: images.svg(r), "logo.svg", "image/svg+xml", "<svg"),  # read as the text it is
    (lambda r: images.ico(r), "favicon.ico", "image/x-icon", None),  # a bitmap: its printable runs
    (lambda r: images.jpeg(r, 2000), "photo.jpg", "image/jpeg", None),
])  # fmt: skip
def test_the_engine_reads_them_as_uploads(make, name, ctype, read):
    for i in range(20):
        body = upload(name, ctype, make(Rng(name, i))).canonical.body
        assert body.startswith(f"u file;{name};{ctype} = ")
        if read:
            assert read in body


def test_xmp_in_a_photo_is_read_as_its_values():
    seen = 0
    for i in range(200):
        data = images.jpeg(Rng("xmp-photo", i), 500)
        if b"<x:xmpmeta" in data:
            body = upload("photo.jpg", "image/jpeg", data).canonical.body
            assert "<rdf:" not in body and "xmp core 6.0.0" in body  # values, not markup (engine.fields.xmp_read)
            seen += 1
    assert seen > 10


def test_uploads_draw_every_format_with_image_uploads_and_bare_bytes_without():
    """`python -m engine.corpus --image-uploads` (Pools.image_uploads) draws every format; without it the uploads
    are the default corpus's, byte for byte: random bytes behind a PNG or JPEG header."""
    texts = {"prose": [{"text": "Hello.", "kind": "prose"}]}
    pools = Pools("train", texts=texts, image_uploads=True)
    types = {file_part(Ctx(Rng("part", i), pools), "image").ctype for i in range(400)}
    assert {"image/png", "image/jpeg", "image/svg+xml", "image/gif"} <= types and types & {"image/x-icon", "image/vnd.microsoft.icon"}
    assert set(IMAGE_FORMATS.items) == {"png", "jpeg", "svg", "gif", "ico"}
    bare = [file_part(Ctx(Rng("part", i), Pools("train", texts=texts)), "image") for i in range(100)]
    assert {p.ctype for p in bare} == {"image/png", "image/jpeg"}
    assert all(p.content[:8] == b"\x89PNG\r\n\x1a\n" and p.content.endswith(b"IEND\xaeB`\x82") or p.content[:4] == b"\xff\xd8\xff\xe0" for p in bare)
