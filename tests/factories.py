"""Test doubles and builders shared by the test packages.

- `FakeClock`: time that only moves when a test advances it.
- `FakeModel(scores=… | error=… | hang=…)`: a stand-in for the engine's model, to reach faults.
- `make_config(raw, origin=…)`: a Config from a dict, with the environment kept out.
- `make_exchange(...)`: an Exchange around a mocked request, for phase tests.
- `Upstream`: an origin (a real aiohttp server on loopback) that records what it received; its
  `/static/…` assets answer with the cache headers a test sets (`Asset`), can be held (`gate`) or fail.
- `raw_url(client, target)`: a URL that keeps a request target as typed (`/../x`, `%27`), unnormalised.
"""

from __future__ import annotations

import asyncio
import gzip
import hashlib
import random
import time
from dataclasses import dataclass, field
from email.utils import formatdate
from typing import Any
from urllib.parse import quote_plus

from aiohttp import web
from aiohttp.test_utils import TestClient, make_mocked_request
from yarl import URL

from engine.errors import EngineError
from engine.features import Features
from engine.verdict import Source, Verdict
from gateway import config as configs
from gateway.config import Config
from gateway.exchange import CONFIG, Exchange

MiB = 1 << 20


def _interim_bundle() -> bool:
    from engine import bundle as bundles

    try:
        return bundles.load().version.startswith("0.0.")
    except Exception:  # a broken bundle fails the bundle tests, not this marker
        return False


# Tests that need the trained default model, not the interim smoke-trained bundle (versions 0.0.x):
# skipped while that interim bundle is installed, run as soon as a trained one is.
INTERIM_BUNDLE = __import__("pytest").mark.skipif(_interim_bundle(), reason="interim model bundle 0.0.x installed")


class FakeClock:
    def __init__(self, start: float = 1000.0):
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class FakeModel:
    """Answers from fixed scores ({"block": 0.9, "allow": 0.1}: the top one wins), or fails on purpose."""

    def __init__(
        self,
        scores: dict[str, float] | None = None,
        error: bool = False,
        hang: bool = False,
        features: tuple[str, ...] = (),
    ):
        self.scores = scores or {"allow": 1.0}
        self.error = error
        self.hang = hang
        self.tags = features
        self.id = "fake@1"
        self.calls = 0
        self.seen: list[Features] = []
        self.closed = False

    def info(self) -> dict[str, Any]:
        return {"name": "fake", "version": "1", "labels": ["block", "cache", "origin", "allow"], "features": []}

    async def predict(self, features: Features) -> Verdict:
        self.calls += 1
        self.seen.append(features)
        if self.hang:
            await asyncio.Event().wait()  # until the decider's timeout cancels it
        if self.error:
            raise EngineError("fake model failed")
        label = max(self.scores, key=self.scores.__getitem__)
        return Verdict(label, self.scores[label], features=self.tags, source=Source.MODEL, model=self.id)

    async def close(self) -> None:
        self.closed = True


class Spy:
    """Wraps a model (the real one) and keeps the Features it was asked about."""

    def __init__(self, model: Any):
        self.model = model
        self.id = model.id
        self.seen: list[Features] = []

    def info(self) -> dict[str, Any]:
        return self.model.info()

    async def predict(self, features: Features) -> Verdict:
        self.seen.append(features)
        return await self.model.predict(features)

    async def close(self) -> None:
        await self.model.close()


def make_config(raw: dict[str, Any] | None = None, origin: str | None = "http://127.0.0.1:1") -> Config:
    raw = dict(raw or {})
    if origin is not None:
        raw["origin"] = {"url": origin, **raw.get("origin", {})}
    return configs.from_dict(raw, env={})


def make_exchange(
    method: str = "GET",
    path: str = "/",
    headers: dict[str, str] | None = None,
    config: Config | None = None,
    decider: Any = None,
) -> Exchange:
    app = web.Application()
    app[CONFIG] = config or make_config()
    request = make_mocked_request(method, path, headers=headers or {}, app=app)
    ex = Exchange.begin(request)
    ex.decider = decider
    return ex


def raw_url(client: TestClient, target: str) -> URL:
    """The client's server URL with `target` appended exactly as written (no dot-segment removal)."""
    return URL(str(client.make_url("")).rstrip("/") + target, encoded=True)


def payload(size: int, seed: int = 7) -> bytes:
    return random.Random(seed).randbytes(size)


@dataclass
class Seen:
    """One request as the origin received it."""

    method: str
    target: str  # raw path and query
    headers: list[tuple[str, str]]  # in order, repeats kept
    size: int
    sha256: str
    chunked: bool

    def header(self, name: str) -> str | None:
        values = self.all(name)
        return values[0] if values else None

    def all(self, name: str) -> list[str]:
        return [v for k, v in self.headers if k.lower() == name.lower()]


@dataclass
class Asset:
    """What the origin answers for one /static/ path: its body and cache headers, and how it validates."""

    body: bytes = b"console.log('clef');\n"
    cache_control: str | None = "public, max-age=60"
    etag: str | None = '"v1"'
    last_modified: str | None = None
    expires_in: float | None = None  # an Expires this many seconds after the response's Date
    vary: str | None = None  # a Vary header; the body then ends with the request's value of that header
    set_cookie: bool = False
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Upstream:
    """An origin on loopback. Every request is recorded in `seen`; the paths below answer specially.

    `/static/{name}` serves `assets[path]` (a default Asset otherwise), answering If-None-Match and
    If-Modified-Since with 304. `gate`, when set, holds those answers until it is set; `fail`, when set,
    makes them that status instead (503 for an origin in trouble); `reset` cuts their connections before
    any answer (a crashed origin). `/reset/head`, `/reset/length` and `/reset/chunked` cut the connection
    before the response, half-way through a Content-Length body, and half-way through a chunked one."""

    seen: list[Seen] = field(default_factory=list)
    url: str = ""
    assets: dict[str, Asset] = field(default_factory=dict)
    gate: asyncio.Event | None = None
    fail: int | None = None
    reset: bool = False
    server: Any = None

    def hits(self, path: str) -> int:
        """Requests the origin received for this target (path and query as sent)."""
        return sum(1 for s in self.seen if s.target == path)

    def app(self) -> web.Application:
        app = web.Application(client_max_size=64 * MiB)
        app.router.add_get("/static/{name:.*}", self.asset)
        app.router.add_get("/download/{size:\\d+}", self.download)
        app.router.add_get("/cookies", self.cookies)
        app.router.add_get("/hop", self.hop)
        app.router.add_get("/gzip", self.gzipped)
        app.router.add_get("/hang", self.hang)
        app.router.add_get("/reset/{how}", self.cut)
        app.router.add_route("*", "/{tail:.*}", self.echo)
        return app

    async def record(self, request: web.Request) -> Seen:
        h, size = hashlib.sha256(), 0
        async for chunk in request.content.iter_any():
            h.update(chunk)
            size += len(chunk)
        seen = Seen(
            method=request.method,
            target=request.raw_path,
            headers=[(k.decode("latin-1"), v.decode("latin-1")) for k, v in request.raw_headers],
            size=size,
            sha256=h.hexdigest(),
            chunked="chunked" in request.headers.get("Transfer-Encoding", "").lower(),
        )
        self.seen.append(seen)
        return seen

    async def echo(self, request: web.Request) -> web.Response:
        seen = await self.record(request)
        return web.json_response({"size": seen.size, "sha256": seen.sha256}, headers={"X-Origin": "yes"})

    async def download(self, request: web.Request) -> web.StreamResponse:
        await self.record(request)
        data = payload(int(request.match_info["size"]))
        response = web.StreamResponse(headers={"X-Sha256": hashlib.sha256(data).hexdigest()})
        await response.prepare(request)  # no Content-Length: chunked
        for i in range(0, len(data), 256 * 1024):
            await response.write(data[i : i + 256 * 1024])
        await response.write_eof()
        return response

    async def cookies(self, request: web.Request) -> web.Response:
        await self.record(request)
        response = web.Response(text="two cookies")
        response.headers.add("Set-Cookie", "a=1; Path=/; HttpOnly")
        response.headers.add("Set-Cookie", "b=2; Path=/; Secure")
        return response

    async def hop(self, request: web.Request) -> web.Response:
        await self.record(request)
        headers = {"Keep-Alive": "timeout=5", "Proxy-Authenticate": "Basic", "X-Private": "hop", "X-End": "kept"}
        response = web.Response(text="hop", headers=headers)
        response.headers["Connection"] = "X-Private"
        return response

    async def gzipped(self, request: web.Request) -> web.Response:
        await self.record(request)
        return web.Response(body=gzip.compress(b"hello " * 100), headers={"Content-Encoding": "gzip"})

    async def hang(self, request: web.Request) -> web.Response:
        await self.record(request)
        await asyncio.Event().wait()  # never answers; the gateway's timeout ends it
        raise AssertionError("unreachable")

    async def cut(self, request: web.Request) -> web.StreamResponse:
        await self.record(request)
        how = request.match_info["how"]
        response = web.StreamResponse(headers={"Content-Length": "1000"} if how == "length" else {})
        if how != "head":
            await response.prepare(request)
            for _ in range(5):
                await response.write(b"x" * 100)  # on loopback these leave at once: abort() drops nothing
        request.transport.abort()
        return response

    async def asset(self, request: web.Request) -> web.Response:
        await self.record(request)
        if self.reset:
            request.transport.abort()
            return web.Response()
        if self.gate is not None:
            await self.gate.wait()
        if self.fail is not None:
            return web.Response(status=self.fail, text="origin in trouble")
        a = self.assets.get(request.path, Asset())
        now = time.time()
        headers = {"Content-Type": "application/javascript", "Date": formatdate(now, usegmt=True), **a.headers}
        for name, value in (("Cache-Control", a.cache_control), ("ETag", a.etag), ("Last-Modified", a.last_modified),
                            ("Vary", a.vary)):  # fmt: skip
            if value is not None:
                headers[name] = value
        if a.expires_in is not None:
            headers["Expires"] = formatdate(now + a.expires_in, usegmt=True)
        inm, ims = request.headers.get("If-None-Match"), request.headers.get("If-Modified-Since")
        if (a.etag and inm == a.etag) or (inm is None and a.last_modified and ims == a.last_modified):
            return web.Response(status=304, headers=headers)
        body = a.body + (request.headers.get(a.vary, "").encode() if a.vary else b"")
        response = web.Response(status=a.status, body=body, headers=headers)
        if a.set_cookie:
            response.headers.add("Set-Cookie", "session=s3cr3t; Path=/; HttpOnly")
        return response


# A tiny labelled corpus for training tests (tests/engine/test_train.py, test_ensemble.py): a payload or a benign
# word in a query, labelled by the project's own policy (engine.labels.label).
CORPUS_ATTACKS = [("sqli", "1' OR '1'='1"), ("sqli", "1 UNION SELECT password FROM users--"), ("xss", "<script>alert(1)</script>"),
                  ("xss", "<img src=x onerror=alert(1)>"), ("path_traversal", "../../../../etc/passwd"), ("cmdi", ";cat /etc/passwd")]
CORPUS_BENIGN = ["shoes", "red running shoes", "O'Brien", "select the best plan", "hello world", "42", "new york"]
CORPUS_PATHS = ["/search", "/products", "/api/items", "/static/app.js", "/account/settings"]


def labelled_record(rng: random.Random, attack: bool) -> dict:
    import urllib.parse

    from engine.labels import label

    cls, value = rng.choice(CORPUS_ATTACKS) if attack else (None, rng.choice(CORPUS_BENIGN))
    method = rng.choice(["GET", "GET", "POST"])
    path = rng.choice(CORPUS_PATHS)
    query = "q=" + urllib.parse.quote(value) + f"&page={rng.randint(1, 9)}"
    headers = [["User-Agent", rng.choice(["Mozilla/5.0", "curl/8.5.0", "python-requests/2.32"])]]
    lab, tags = label(Features.build(method, path, query, headers), [cls] if attack else None)
    return {"method": method, "path": path, "query": query, "headers": headers, "body": "", "label": lab,
            "attack_class": cls, "features": list(tags), "group": f"g{rng.randint(0, 40)}"}  # fmt: skip


def labelled_corpus(folder, rng: random.Random, train: int = 400, test: int = 80):
    """`folder/train.jsonl` and `folder/test.jsonl` of labelled records, every other one an attack: a corpus that
    `python -m engine.train` trains a tiny bundle on in seconds. Returns `folder`."""
    import json

    folder.mkdir(parents=True, exist_ok=True)
    for name, n in (("train", train), ("test", test)):
        (folder / f"{name}.jsonl").write_text("".join(json.dumps(labelled_record(rng, i % 2 == 0)) + "\n" for i in range(n)))
    return folder


# `python -m engine.train` arguments for a tiny bundle on a labelled_corpus: one epoch of a d=16 network. `--int8 dynamic`:
# the automatic choice reads timings, which another load on the machine can tip between two runs of one test.
TINY_TRAINING = ["--epochs", "1", "--vocab", "600", "--threads", "1", "--train-max-tokens", "128", "--dim", "16", "--ffn", "32",
                 "--int8", "dynamic"]  # fmt: skip


def dev_split_corpus(folder, rng: random.Random, n: int = 600) -> list[dict]:
    """`folder/train.jsonl` of `n` labelled records (a third attacks), every record its own group, so that about
    5 % land in a bundle's dev split (engine.train's split_dev): for the benchmarks that read that split."""
    import json

    rows = [labelled_record(rng, i % 3 == 0) for i in range(n)]
    for i, r in enumerate(rows):
        r["group"] = f"t{i}"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return rows


def cms_page_save(extra: str = "") -> Features:
    """An 84 KB CMS page save: a guide to server-side includes in one long field, many plain fields, and
    `extra` appended as one more form field."""
    guide = 'Server-side includes run commands: <!--#exec cmd="ls" --> prints a listing. ' + "More words about directives. " * 150
    pad = "&".join(f"f{i}=" + quote_plus("plain words of a page " * 30) for i in range(120))
    body = "title=SSI+guide&body=" + quote_plus(guide) + "&" + pad + extra
    return Features.build("POST", "/cms/save", body=body, headers={"Content-Type": "application/x-www-form-urlencoded", "User-Agent": "t"})


def padding_leaves(n: int) -> list[dict]:
    """`n` distinct prose JSON leaves: more than rules.targets.PER_KIND of them make the rules read a run."""
    return [{"note": f"line {i} of the export, with words"} for i in range(n)]


def bench_script(name: str):
    """bench/NAME.py loaded as a module (bench/ holds scripts, not a package): what the benchmarks' tests call."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "bench" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"bench_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
