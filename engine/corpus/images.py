"""Benign image files for uploads, as design tools, cameras and icon sets write them.

A real upload is rarely bare pixels. Vector icons are XML with paths, gradients, `<style>` blocks, `<use>`
references and an editor's metadata; photos carry EXIF and an XMP packet; PNGs from editors carry text
chunks; icons are uncompressed bitmaps whose pixel bytes read as symbol soup. The model must see those as
benign in an upload, so that only what an attacker adds (a handler, a script, a shell) stands out.

Every function takes the record's own `Rng` and returns the file's bytes; nothing is read from disk. The
corpus draws these with `python -m engine.corpus --image-uploads` (Pools.image_uploads); without it, uploads hold
random bytes behind a PNG or JPEG header (bare_png, bare_jpeg), as the default bundle's corpus does.
"""

from __future__ import annotations

import struct
import zlib
from xml.sax.saxutils import escape

from engine.corpus import vocab
from engine.corpus.rand import Rng

_CMDS = "MLHVCSQTAZ"
_TOOLS = ("Adobe Photoshop 24.1 (Macintosh)", "Adobe Photoshop Lightroom Classic 12.4 (Windows)", "GIMP 2.10.34",
          "Adobe Illustrator 27.5 (Macintosh)", "Inkscape 1.3 (0e150ed6c4, 2023-07-21)", "Pixelmator Pro 3.3",
          "Affinity Photo 2.1.1", "Darktable 4.4.2", "Snapseed 2.0", "Canva", "Figma")  # fmt: skip
_CAMERAS = (("Canon", "Canon EOS 80D"), ("NIKON CORPORATION", "NIKON D750"), ("Apple", "iPhone 14 Pro"),
            ("SONY", "ILCE-7M3"), ("FUJIFILM", "X-T4"), ("samsung", "SM-G991B"), ("Google", "Pixel 7"))  # fmt: skip


def _num(rng: Rng, hi: float = 24.0) -> str:
    v = rng.random() * hi
    return rng.pick([f"{v:.0f}", f"{v:.1f}", f"{v:.2f}", f"{v:.3f}"]).rstrip("0").rstrip(".") or "0"


def _path_data(rng: Rng, size: float) -> str:
    out = [f"M{_num(rng, size)} {_num(rng, size)}"]
    for _ in range(rng.randrange(2, 40)):
        c = rng.pick(_CMDS[1:-1])
        c = c.lower() if rng.chance(0.6) else c
        n = {"H": 1, "V": 1, "L": 2, "T": 2, "C": 6, "S": 4, "Q": 4, "A": 7}[c.upper()]
        if c.upper() == "A":
            args = [_num(rng, size), _num(rng, size), "0", rng.pick("01"), rng.pick("01"), _num(rng, size), _num(rng, size)]
        else:
            args = [("-" if rng.chance(0.3) else "") + _num(rng, size) for _ in range(n)]
        out.append(c + rng.pick([" ", ","]).join(args))
    return rng.pick(["", " "]).join(out) + rng.pick(["z", "Z", ""])


def _title(rng: Rng) -> str:
    return escape(vocab.title(rng))


def _opt(rng: Rng, name: str, value: str, p: float = 0.5) -> str:
    return f' {name}="{value}"' if rng.chance(p) else ""


def _color(rng: Rng) -> str:
    return rng.pick([f"#{rng.hexid(6)}", f"#{rng.hexid(3)}", "currentColor", "none", "#fff", "#000", f"rgb({rng.randrange(256)},{rng.randrange(256)},{rng.randrange(256)})"])


def svg(rng: Rng) -> bytes:
    """An SVG icon, logo or illustration as an editor or icon set exports it."""
    size = rng.pick([16, 20, 24, 32, 48, 64, 100, 128, 512])
    tool = rng.pick(["plain", "inkscape", "illustrator", "figma", "material"])
    ids = [f"{rng.pick(['a', 'b', 'c', 'path', 'g', 'clip', 'linearGradient', 'layer'])}{rng.randrange(1, 999)}" for _ in range(3)]
    head = '<?xml version="1.0" encoding="UTF-8"?>\n' if rng.chance(0.6) else ""
    attrs = f'xmlns="http://www.w3.org/2000/svg" width="{size}" height="{size}" viewBox="0 0 {size} {size}"'
    xlink = rng.chance(0.4)
    extra = ""
    if tool == "illustrator":
        head += (f"<!-- Generator: Adobe Illustrator {rng.randrange(16, 28)}.0.0, SVG Export Plug-In . SVG Version: 6.00 Build 0)  -->\n"
                 if rng.chance(0.7) else "")
        attrs = f'version="1.1" id="Layer_1" x="0px" y="0px" {attrs} style="enable-background:new 0 0 {size} {size};" xml:space="preserve"'
        extra = f'<style type="text/css">\n\t.st0{{fill:{_color(rng)};}}\n\t.st1{{fill:none;stroke:{_color(rng)};stroke-width:{_num(rng, 4)};stroke-miterlimit:10;}}\n</style>\n'
    elif tool == "inkscape":
        attrs += (' xmlns:inkscape="http://www.inkscape.org/namespaces/inkscape"'
                  ' xmlns:sodipodi="http://sodipodi.sourceforge.net/DTD/sodipodi-0.dtd"'
                  ' xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#" xmlns:cc="http://creativecommons.org/ns#"'
                  ' xmlns:dc="http://purl.org/dc/elements/1.1/"'
                  f' sodipodi:docname="{vocab.slug(rng, 2)}.svg" inkscape:version="1.{rng.randrange(0, 4)} (1:1.{rng.randrange(0, 4)}+202{rng.randrange(0, 5)})"')  # fmt: skip
        extra = (f'<sodipodi:namedview id="namedview{rng.randrange(1, 99)}" pagecolor="#ffffff" bordercolor="#666666" borderopacity="1.0"'
                 f' inkscape:zoom="{_num(rng, 40)}" inkscape:cx="{_num(rng, 200)}" inkscape:cy="{_num(rng, 200)}"'
                 f' inkscape:current-layer="layer1" showgrid="{rng.pick(["true", "false"])}" />\n')  # fmt: skip
        if rng.chance(0.6):
            extra += ('<metadata><rdf:RDF><cc:Work rdf:about=""><dc:format>image/svg+xml</dc:format>'
                      '<dc:type rdf:resource="http://purl.org/dc/dcmitype/StillImage" />'
                      f"<dc:title>{_title(rng)}</dc:title><dc:creator><cc:Agent><dc:title>{escape(vocab.full_name(rng))}</dc:title>"
                      f'</cc:Agent></dc:creator><cc:license rdf:resource="http://creativecommons.org/licenses/by-sa/4.0/" />'
                      "</cc:Work></rdf:RDF></metadata>\n")  # fmt: skip
    elif tool == "material":
        attrs = f'xmlns="http://www.w3.org/2000/svg" height="{size}" viewBox="0 -960 960 960" width="{size}"'
    if xlink:
        attrs += ' xmlns:xlink="http://www.w3.org/1999/xlink"'
    body = []
    if rng.chance(0.3):
        body.append(f"<title>{_title(rng)}</title>")
    if rng.chance(0.35):
        stops = "".join(f'<stop offset="{_num(rng, 1)}" stop-color="{_color(rng)}"{_opt(rng, "stop-opacity", _num(rng, 1))}/>' for _ in range(rng.randrange(2, 5)))
        body.append(f'<defs><linearGradient id="{ids[0]}" x1="0%" y1="0%" x2="100%" y2="100%">{stops}</linearGradient>'
                    f'<clipPath id="{ids[1]}"><rect width="{size}" height="{size}" rx="{_num(rng, 8)}"/></clipPath></defs>')  # fmt: skip
    group = rng.chance(0.5)
    if group:
        attr = rng.pick([("", ""), ("transform", f"translate({_num(rng, 10)} {_num(rng, 10)})"), ("clip-path", f"url(#{ids[1]})"), ("id", ids[2])])
        body.append(f'<g fill="{_color(rng)}"{_opt(rng, *attr, p=1.0) if attr[0] else ""}>')
    for _ in range(rng.randrange(1, 9)):
        shape = rng.pick(["path", "path", "path", "circle", "rect", "polygon", "use", "text"])
        if shape == "path":
            paint = rng.pick(["", f' fill="{_color(rng)}"', f' fill="url(#{ids[0]})"', ' class="st0"', f' stroke="{_color(rng)}" stroke-width="{_num(rng, 3)}" stroke-linecap="round" stroke-linejoin="round"',
                              ' style="line-height:normal;font-variant-ligatures:normal;text-indent:0;text-align:start;text-transform:none;isolation:auto;mix-blend-mode:normal" color="#000"'])
            body.append(f'<path d="{_path_data(rng, size)}"{paint}{rng.pick(["", _opt(rng, "fill-rule", "evenodd", 1.0), _opt(rng, "opacity", ".5", 1.0)])}/>')
        elif shape == "circle":
            body.append(f'<circle cx="{_num(rng, size)}" cy="{_num(rng, size)}" r="{_num(rng, size / 2)}" fill="{_color(rng)}"/>')
        elif shape == "rect":
            body.append(f'<rect x="{_num(rng, size)}" y="{_num(rng, size)}" width="{_num(rng, size)}" height="{_num(rng, size)}" rx="{_num(rng, 4)}"/>')
        elif shape == "polygon":
            body.append(f'<polygon points="{" ".join(f"{_num(rng, size)},{_num(rng, size)}" for _ in range(rng.randrange(3, 9)))}"/>')
        elif shape == "use":
            body.append(f'<use {"xlink:href" if xlink else "href"}="#{ids[2]}" x="{_num(rng, size)}" y="{_num(rng, size)}"/>')
        else:
            body.append(f'<text x="{_num(rng, size)}" y="{_num(rng, size)}" font-family="{rng.pick(["Helvetica, Arial, sans-serif", "Roboto", "Open Sans"])}" font-size="{rng.randrange(8, 40)}">{_title(rng)}</text>')
    if group:
        body.append("</g>")
    sep = rng.pick(["", "\n", "\n  "])
    return f"{head}<svg {attrs}>{sep}{extra}{sep.join(body)}{sep}</svg>\n".encode()


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def xmp_packet(rng: Rng) -> bytes:
    """The XMP packet an editor writes into a photo or a PNG."""
    tool = rng.pick(_TOOLS)
    date = f"{vocab.date(rng)}T{rng.randrange(24):02d}:{rng.randrange(60):02d}:{rng.randrange(60):02d}{rng.pick(['', 'Z', '+02:00', '-05:00'])}"
    desc = rng.pick(["", f"<dc:description><rdf:Alt><rdf:li xml:lang=\"x-default\">{_title(rng)}</rdf:li></rdf:Alt></dc:description>",
                     f"<dc:creator><rdf:Seq><rdf:li>{escape(vocab.full_name(rng))}</rdf:li></rdf:Seq></dc:creator>"])
    return (f'<?xpacket begin="\ufeff" id="W5M0MpCehiHzreSzNTczkc9d"?>\n<x:xmpmeta xmlns:x="adobe:ns:meta/" x:xmptk="XMP Core 6.0.0">\n'
            ' <rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#">\n'
            '  <rdf:Description rdf:about="" xmlns:xmp="http://ns.adobe.com/xap/1.0/" xmlns:dc="http://purl.org/dc/elements/1.1/"'
            ' xmlns:exif="http://ns.adobe.com/exif/1.0/" xmlns:tiff="http://ns.adobe.com/tiff/1.0/"\n'
            f'   xmp:CreatorTool="{tool}" xmp:CreateDate="{date}" xmp:ModifyDate="{date}"'
            f' exif:PixelXDimension="{rng.randrange(16, 6000)}" exif:PixelYDimension="{rng.randrange(16, 4000)}" tiff:Orientation="1">\n'
            f"   <dc:format>{rng.pick(['image/png', 'image/jpeg'])}</dc:format>{desc}\n"
            "  </rdf:Description>\n </rdf:RDF>\n</x:xmpmeta>\n" + " " * rng.randrange(0, 400) + '\n<?xpacket end="w"?>').encode()  # fmt: skip


def bare_png(rng: Rng, size: int) -> bytes:
    """Random bytes behind a PNG header: the default corpus's uploads (kept byte for byte without --image-uploads)."""
    head = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + rng.randbytes(13) + b"\x00\x00\x00\x00"
    return head + b"\x00\x00" + rng.randbytes(max(16, size)) + b"\x00\x00\x00\x00IEND\xaeB`\x82"


def bare_jpeg(rng: Rng, size: int) -> bytes:
    """Random bytes behind a JFIF header: the default corpus's uploads."""
    return b"\xff\xd8\xff\xe0\x00\x10JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00\xff\xdb\x00C\x00" + rng.randbytes(max(16, size)) + b"\xff\xd9"


def png(rng: Rng, size: int) -> bytes:
    """A PNG: header, maybe an editor's text chunks or XMP, compressed-looking pixels."""
    out = b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", struct.pack(">IIBBBBB", rng.randrange(16, 4000), rng.randrange(16, 3000), 8, rng.pick([2, 6]), 0, 0, 0))
    if rng.chance(0.3):
        out += _chunk(b"tEXt", b"Software\x00" + rng.pick([b"www.inkscape.org", b"gnome-screenshot", b"Adobe ImageReady", b"Greenshot", b"matplotlib version3.8.0, https://matplotlib.org/"]))
    if rng.chance(0.2):
        out += _chunk(b"iTXt", b"XML:com.adobe.xmp\x00\x00\x00\x00\x00" + xmp_packet(rng))
    if rng.chance(0.15):
        out += _chunk(b"pHYs", struct.pack(">IIB", 2835, 2835, 1)) + _chunk(b"tIME", rng.randbytes(7))
    return out + _chunk(b"IDAT", b"x\x9c" + rng.randbytes(max(16, size))) + _chunk(b"IEND", b"")


def jpeg(rng: Rng, size: int) -> bytes:
    """A JPEG: JFIF or a camera's EXIF, maybe an XMP packet, then entropy-coded data."""
    out = b"\xff\xd8"
    if rng.chance(0.4):
        make, model = rng.pick(_CAMERAS)
        text = b"\x00".join(s.encode() for s in (make, model, rng.pick(_TOOLS), f"{vocab.date(rng).replace('-', ':')} {rng.randrange(24):02d}:{rng.randrange(60):02d}:{rng.randrange(60):02d}"))
        exif = b"Exif\x00\x00MM\x00*\x00\x00\x00\x08" + rng.randbytes(rng.randrange(40, 200)) + text + b"\x00" + rng.randbytes(rng.randrange(20, 400))
        out += b"\xff\xe1" + struct.pack(">H", len(exif) + 2) + exif
    else:
        out += b"\xff\xe0\x00\x10JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00"
    if rng.chance(0.2):
        xmp = b"http://ns.adobe.com/xap/1.0/\x00" + xmp_packet(rng)
        out += b"\xff\xe1" + struct.pack(">H", len(xmp) + 2) + xmp
    return out + b"\xff\xdb\x00C\x00" + rng.randbytes(max(16, size)) + b"\xff\xd9"


def gif(rng: Rng, size: int) -> bytes:
    """A GIF: screen descriptor, palette, maybe a loop extension and a comment, LZW data."""
    colors = 2 ** rng.randrange(1, 9)
    out = rng.pick([b"GIF89a", b"GIF87a"]) + struct.pack("<HHBBB", rng.randrange(1, 800), rng.randrange(1, 600), 0xF0 | (colors.bit_length() - 2), 0, 0)
    out += bytes(rng.randrange(256) for _ in range(3 * colors))
    if rng.chance(0.3):
        out += b"!\xff\x0bNETSCAPE2.0\x03\x01\x00\x00\x00"
    if rng.chance(0.2):
        note = rng.pick([b"Created with GIMP", b"Created with ezgif.com GIF maker", b"GIF optimized with gifsicle"])
        out += b"!\xfe" + bytes([len(note)]) + note + b"\x00"
    return out + b",\x00\x00\x00\x00" + rng.randbytes(4) + b"\x00\x08" + rng.randbytes(max(16, min(size, 20_000))) + b"\x00;"


def ico(rng: Rng) -> bytes:
    """A Windows icon: one to four uncompressed 32-bit bitmaps (pixel bytes in every range), or a PNG inside."""
    sizes = sorted(rng.sample([16, 24, 32, 48, 64], rng.randrange(1, 4)))
    palette = [bytes(rng.randrange(256) for _ in range(3)) + bytes([rng.pick([0, 255, 255, rng.randrange(256)])]) for _ in range(rng.randrange(2, 12))]
    images = []
    for s in sizes:
        if rng.chance(0.15):
            images.append(png(rng, s * s))
            continue
        header = struct.pack("<IiiHHIIiiII", 40, s, 2 * s, 1, 32, 0, s * s * 4, 0, 0, 0, 0)
        rows = []
        for _ in range(s):  # transparent rows, flat runs of a few colours, and anti-aliased edges of any value
            kind = rng.random()
            if kind < 0.25:
                rows.append(bytes(4 * s))
            elif kind < 0.6:
                rows.append(b"".join(rng.pick(palette) * rng.randrange(1, s) for _ in range(4))[: 4 * s].ljust(4 * s, b"\x00"))
            else:
                rows.append(bytes(rng.pick([0, 255, rng.randrange(32, 127), rng.randrange(256)]) for _ in range(4 * s)))
        pixels = b"".join(rows)
        mask = bytes(rng.pick([0, 0, 255]) for _ in range(s * ((s + 31) // 32) * 4))
        images.append(header + pixels + mask)
    out = struct.pack("<HHH", 0, 1, len(images))
    offset = 6 + 16 * len(images)
    for s, data in zip(sizes, images):
        out += struct.pack("<BBBBHHII", s % 256, s % 256, 0, 0, 1, 32, len(data), offset)
        offset += len(data)
    return out + b"".join(images)
