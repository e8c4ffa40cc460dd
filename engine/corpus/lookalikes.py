"""Generated lookalikes: benign values that share surface features with attacks, built from parts.

The hand-written hard negatives (engine.corpus.hardneg) are single sentences. Three kinds of everyday
input need more variety than a list gives, because a model learns the one token they share with attacks:

- `joined`: searches and titles that join phrases with `&`, `|`, `;` or `&&`, where a phrase starts with a
  word that is also a shell command ("sleep & relaxation music", "cat toys | dog beds", "ping pong & darts").
  A command after a separator is command injection only with a command line after it.
- `howto`: questions about commands, variables and SQL functions, as people type them into a search box
  or a help-desk form ("whoami command windows", "${HOME} variable linux", "waitfor delay sql server").
- `token`: opaque values that services put in URLs, forms and cookies: base64 of sparse bit flags and
  zero-padded ids (runs of `A`), cursors, all-zero UUIDs and hashes. Runs of one letter are also what
  format-string and overflow payloads pad with; here they carry nothing.

- `probe`: monitoring and operations requests, a bare short path from a program with no page around it
  (`GET /healthz` from kube-probe, `HEAD /api/v1/ping` from an uptime checker, `GET /-/ready` from curl).
  A scanner probe is also a bare short path from a program; what tells them apart is the path, and a
  model that has seen only a handful of health paths takes any unfamiliar one for a probe.

Groups are `lk:<family>:<key>` (the command word, the question shape, the token kind, the endpoint's
word family), so the test split holds out whole command words, question shapes, token kinds and endpoint
families (engine.corpus.split.in_test).
"""

from __future__ import annotations

import base64
import struct
from typing import Callable, Iterator

from engine.corpus import vocab
from engine.corpus.rand import Rng

# Everyday phrases that begin with a word that is also a command (shell or Windows), by that word.
COMMAND_PHRASES = {
    "sleep": "sleep sounds|sleep mask|relaxation sleep music|sleep tracker watch|sleep apnea symptoms|deep sleep",
    "cat": "cat toys|cat food|cat tree|cat litter|cat videos|cat carrier bag",
    "ping": "ping pong|ping pong table|ping golf clubs|ping g430 driver",
    "echo": "echo dot|echo show 8|echo chamber|echo park",
    "kill": "kill bill|kill switch|kill la kill|killer queen",
    "find": "find my phone|find a doctor|find a grave|find jobs near me",
    "touch": "touch screen gloves|touch lamp|touch id not working|touch up paint",
    "more": "more info|more than words|more coffee please",
    "less": "less sugar recipes|less is more|less stress",
    "sort": "sort code lookup|sort by date|sort it out",
    "head": "head lamp|head and shoulders|head of sales jobs",
    "tail": "tail light|tail of two cities|tail wagging",
    "dig": "dig deeper|dig in|dig site tours",
    "curl": "curl cream|curl defining gel|curling iron",
    "id": "id card|id photo size|id verification",
    "who": "who we are|who is calling|who won the game",
    "time": "time zone converter|time sheet template|time out",
    "date": "date night ideas|date ideas|date format",
    "set": "set list|set menu|set up printer",
    "type": "type c cable|type 2 diabetes|type of cheese",
    "start": "start page|start a business|starter kit",
    "net": "net worth|net income|net zero|net promoter score",
    "host": "host family|host a party|hosting plans",
    "mail": "mail merge|mail tracking|mailbox lock",
    "top": "top 10 movies|top gun|top deals today",
    "watch": "watch strap|watch movies online|watch repair",
    "make": "make up tutorial|make a wish|makeup brushes",
    "which": "which one is better|which way to go",
    "cut": "cut hair at home|cut the rope|cut flowers",
    "join": "join us|join our team|join the club",
    "split": "split screen|split peas soup|split pdf",
    "file": "file taxes online|file cabinet|file a complaint",
    "test": "test drive|test kitchen|test results",
    "read": "read more|read aloud|reading glasses",
    "write": "write a review|write a letter|writing desk",
    "print": "print shop|print photos|printer ink",
    "history": "history channel|history of rome|history podcast",
    "source": "source code pro font|sourdough starter|source of truth",
    "copy": "copy paste|copy shop|copy editor jobs",
    "move": "move out cleaning|moving boxes|move in ready homes",
    "call": "call me maybe|call of duty|call centre jobs",
    "nc": "nc state|nc dmv|nc beaches",
    "ls": "ls swap|ls 500h|ls400 parts",
    "rm": "rm williams boots|rm sotheby's|rm 2000 camera",
    "wait": "wait staff jobs|waiting room chairs|wait for it",
    "shutdown": "shutdown timer|shutdown of the government",
    "bash": "bash birthday party|bash the drum|bash street kids",
    "whoami": "whoami meaning|whoami podcast",
}
# " || " is listed twice, so drawn twice as often; candidate 0.6.0 (bench/RESULTS.md) was trained on this list.
SEPARATORS = (" & ", " | ", "; ", " && ", " || ", " and ", " / ", " + ", ", ", "&", " || ")
ENDINGS = "for kids|for sale|near me|review|price|2024|deals|uk|online|set|for beginners|ideas".split("|")

# Questions about commands, variables and SQL functions: {c} a command, {v} a variable, {q} a SQL function.
QUESTIONS = {
    "command-os": "{c} command {os}|{c} command not found|{c} command example|{c} command in {os}",
    "how-use": "how to use {c} in {shell}|how to run {c} as admin|how do I use {c}|{c} vs {c2}",
    "what-does": "what does {c} do|what is {c} used for|{c} meaning|{c} explained",
    "flags": "{c} {flag} example|{c} {flag} output|{c} {flag} not working|{c} options list",
    "variable": "{v} variable {os}|how to set {v}|{v} not set|echo {v} empty|print {v} in {shell}",
    "sql-fn": "{q} {db}|{q} example {db}|{q} syntax|how to use {q} in {db}|{q} vs {q2}",
    "error": "{c}: permission denied|{c}: command not found fix|{c} returns exit code 1",
}
COMMANDS = ("whoami uname ifconfig ipconfig netstat wget curl chmod chown sudo ping traceroute nslookup dig cat grep awk "
            "sed sleep timeout tasklist systeminfo hostname id ls dir tar crontab systemctl journalctl ssh scp "
            "rsync nohup kill ps top free df du env export").split()
FLAGS = "-a|-l|-la|-rf|-n|-v|-h|--help|-r|/all|-e|-c 4|-p".split("|")
VARIABLES = "${HOME}|$HOME|$PATH|${PATH}|%APPDATA%|%USERPROFILE%|$USER|${JAVA_HOME}|$env:PATH|%PATH%|$SHELL|${PWD}".split("|")
SQL_FUNCTIONS = ("waitfor delay|pg_sleep|sleep()|benchmark()|concat()|group_concat|substring()|char()|ascii()|"
                 "load_file|information_schema tables|union all vs union|select into outfile|xp_cmdshell enable|"
                 "cast as varchar|coalesce|row_number over partition|dbms_lock.sleep|sys.tables").split("|")
SHELLS = ("bash", "zsh", "powershell", "cmd", "fish", "a script")
OSES = ("linux", "windows", "mac", "ubuntu", "windows 11", "debian")
DBS = ("sql server", "mysql", "postgres", "oracle", "sqlite", "mariadb")


def joined(rng: Rng) -> tuple[str, str]:
    """(group key, value): phrases joined by a separator, one led by a command word."""
    word = rng.pick(sorted(COMMAND_PHRASES))
    first = rng.pick(COMMAND_PHRASES[word].split("|"))
    other = rng.call(lambda: rng.pick(COMMAND_PHRASES[rng.pick(sorted(COMMAND_PHRASES))].split("|")),
                     lambda: f"{rng.pick(vocab.ADJ)} {rng.pick(vocab.WORDS)}", lambda: rng.pick(vocab.WORDS))
    a, b = (first, other) if rng.chance(0.6) else (other, first)
    value = a + rng.pick(SEPARATORS) + b
    if rng.chance(0.3):
        value += " " + rng.pick(ENDINGS)
    if rng.chance(0.25):
        value = value.title() if rng.chance(0.5) else value.capitalize()
    return word, value


def howto(rng: Rng) -> tuple[str, str]:
    """(group key, value): a question about a command, a variable or a SQL function."""
    shape = rng.pick(sorted(QUESTIONS))
    text = rng.pick(QUESTIONS[shape].split("|"))
    fills: dict[str, Callable[[], str]] = {
        "{c2}": lambda: rng.pick(COMMANDS), "{c}": lambda: rng.pick(COMMANDS), "{flag}": lambda: rng.pick(FLAGS),
        "{v}": lambda: rng.pick(VARIABLES), "{q2}": lambda: rng.pick(SQL_FUNCTIONS), "{q}": lambda: rng.pick(SQL_FUNCTIONS),
        "{os}": lambda: rng.pick(OSES), "{shell}": lambda: rng.pick(SHELLS), "{db}": lambda: rng.pick(DBS),
    }  # fmt: skip
    for key, fn in fills.items():
        while key in text:
            text = text.replace(key, fn(), 1)
    if rng.chance(0.15):
        text += "?"
    return shape, text


def _b64(data: bytes, url: bool) -> str:
    return (base64.urlsafe_b64encode(data) if url else base64.b64encode(data)).decode()


def _sparse_flags(rng: Rng, n: int) -> bytes:
    """Bit flags as clients pack them: most bytes zero, a few with one or two bits set."""
    out = bytearray(n)
    for i in range(n):
        if rng.chance(0.4):
            out[i] = 1 << rng.randrange(8)
            if rng.chance(0.3):
                out[i] |= 1 << rng.randrange(8)
    return bytes(out)


TOKENS: dict[str, Callable[[Rng], str]] = {
    "flags": lambda r: _b64(_sparse_flags(r, r.randrange(6, 18)), True).rstrip("=") + r.pick(["", "", "~", "."]),
    "zero-b64": lambda r: _b64(bytes(r.randrange(4, 33)), r.chance(0.5)).rstrip("=" if r.chance(0.3) else ""),
    "padded-id": lambda r: _b64(bytes(r.randrange(2, 12)) + r.randbytes(r.randrange(2, 10)), r.chance(0.5)),
    "page-token": lambda r: _b64(bytes([8, r.randrange(1, 100), 16, 0, 24, 0]) + struct.pack(">I", r.randrange(0, 2**20)), True),
    "cursor": lambda r: _b64(("{\"offset\":%d,\"id\":0,\"v\":%d}" % (r.randrange(0, 500), r.randrange(1, 3))).encode(), False),
    "zero-uuid": lambda r: r.pick(["00000000-0000-0000-0000-000000000000", "0" * 32, "0" * 40, "0x" + "0" * r.randrange(8, 41)]),
    "padded-hex": lambda r: "0" * r.randrange(8, 30) + r.hexid(r.randrange(1, 9)),
    "repeat": lambda r: r.pick("AaXx0ZzF-_.") * r.randrange(8, 48) + (r.alnum(r.randrange(1, 6)) if r.chance(0.5) else ""),
}
TOKEN_NAMES = ("_u _f v bm cid pt pageToken page_token cursor next after before state ctx flags sig tk z s cb "
               "fp enc opt mask bits ref rt").split()


def token(rng: Rng) -> tuple[str, str, str]:
    """(group key, parameter name, value): an opaque token a service puts in a request."""
    kind = rng.pick(sorted(TOKENS))
    return kind, rng.pick(TOKEN_NAMES), TOKENS[kind](rng)


# Health, readiness, status and metrics endpoints, by word family. Each is completed with a prefix, sometimes a
# sub-check and a query. Not here: what the scanner lists probe for (`server-status`, `status?full=true`,
# `status/`, `uptime`, `info.php`, `info.txt`), which the corpus labels as attacks, nor a path under `/sys/`,
# which the CRS restricted-files list (and so the rules) blocks.
PROBE_WORDS = {
    "health": "health|healthz|healthcheck|health-check|health_check|_health|__health|hc",
    "ready": "ready|readyz|readiness|isready|ready.json",
    "live": "live|livez|liveness|alive|isalive|healthy",
    "ping": "ping|_ping|pingz|ping.json",
    "up": "up|isup|_up|up.json",
    "heartbeat": "heartbeat|__heartbeat__|__lbheartbeat__|keepalive|hb",
    "version": "version|__version__|build-info|buildinfo|release",
    "metrics": "metrics|_metrics|prometheus|stats/prometheus|federate",
    "lb": "lbcheck|lb-check|lb/health|elb-check|gtg|__gtg|ok",
    "status": "status|_status|statusz|status.json|api-status",
}
PROBE_PREFIXES = ("", "", "", "", "/api", "/api/v1", "/v1", "/v2", "/-", "/_", "/internal", "/ops", "/service", "/platform",
                  "/app", "/admin/api", "/monitoring", "/management")  # fmt: skip
PROBE_CHECKS = ("db", "database", "redis", "cache", "queue", "deep", "detail", "all", "disk", "kafka", "upstream")
PROBE_QUERIES = ("format=json", "verbose=1", "pretty=true", "source=lb", "probe=liveness", "probe=readiness", "check=db",
                 "_={ts}", "t={ts}", "ts={ts}", "nocache={ts}", "exclude=disk", "name[]=db&name[]=redis")  # fmt: skip
# Checkers as they announce themselves (Consul's repeats engine.corpus.profiles.MONITORS); none matches the CRS
# scanners-user-agents list.
PROBE_AGENTS = (
    "Go-http-client/1.1", "Go-http-client/2.0", "curl/8.5.0", "curl/7.88.1", "Envoy/HC", "HAProxy/2.8",
    "Amazon-Route53-Health-Check-Service (ref 7b3c2d1e-57a2-4e77-9a8b-3c2f0d4e6a1b; report http://amzn.to/1vsZADi)",
    "NewRelicSynthetics/1.0", "Site24x7", "Checkly/1.0 (https://www.checklyhq.com)", "Uptime-Kuma/1.23.11",
    "check_http/v2.3.3 (monitoring-plugins 2.3.3)", "Zabbix", "Icinga/2.14.2", "Gatus/1.0", "Traefik",
    "Mozilla/5.0 (compatible; Better Uptime Bot Chrome/119.0.0.0; +https://betterstack.com/docs/monitoring/uptime-robot/)",
    "Mozilla/5.0 (compatible; Nagios)", "cloudflare-healthchecks", "kube-probe/1.30", "Consul Health Check",
    "GoogleStackdriverMonitoring-UptimeChecks(https://cloud.google.com/monitoring)", "AzureHealthProbe/1.0",
)  # fmt: skip


def probe(rng: Rng) -> tuple[str, str, str]:
    """(group key, path, query): a monitoring request's target."""
    key = rng.pick(sorted(PROBE_WORDS))
    path = rng.pick(PROBE_PREFIXES) + "/" + rng.pick(PROBE_WORDS[key].split("|"))
    if key in ("health", "ready", "live") and "." not in path and rng.chance(0.25):
        path += "/" + rng.pick(PROBE_CHECKS)
    query = ""
    if rng.chance(0.3):
        query = rng.pick(PROBE_QUERIES).replace("{ts}", str(1_700_000_000_000 + rng.randrange(10**11)))
    return key, path, query


FAMILIES = ("joined", "howto", "token", "probe")


def values(rng: Rng, family: str) -> Iterator[tuple[str, str, str]]:
    """An endless stream of (group, parameter name or "", value) of one family; for `probe`, (group, path,
    query)."""
    while True:
        if family == "probe":
            key, path, query = probe(rng)
            yield f"lk:probe:{key}", path, query
        elif family == "token":
            kind, name, value = token(rng)
            yield f"lk:token:{kind}", name, value
        else:
            key, value = (joined if family == "joined" else howto)(rng)
            yield f"lk:{family}:{key}", "", value
