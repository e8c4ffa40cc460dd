"""Header profiles: the header sets real clients send, in their real order.

`headers(rng, mode, host)` returns the headers of one request of a given kind (`navigate`, `asset`,
`fetch`, `form`, `api`, `bot`, `monitor`, `bare`), from a client drawn for that kind. The benign generator and the
attack embedder call it the same way for the same request shapes, so no header set identifies a label
(MODEL-NOTES: header profiles were evidence until they were mixed across labels).

Cookies, credentials and the edge proxy's forwarding headers are added by `engine.corpus.draft`, which
knows whether a request carries a session; Content-Type and Content-Length come with the body.
"""

from __future__ import annotations

from engine.corpus.rand import Rng, Weighted

ACCEPT_LANGUAGE = [
    "en-US,en;q=0.9", "en-GB,en;q=0.9", "en-US,en;q=0.5", "de-DE,de;q=0.9,en-US;q=0.8,en;q=0.7",
    "fr-FR,fr;q=0.9,en-US;q=0.8,en;q=0.7", "es-ES,es;q=0.9", "pt-BR,pt;q=0.9,en-US;q=0.8,en;q=0.7",
    "ja,en-US;q=0.9,en;q=0.8", "zh-CN,zh;q=0.9", "ko-KR,ko;q=0.9,en-US;q=0.8,en;q=0.7", "ru-RU,ru;q=0.9,en;q=0.8",
    "it-IT,it;q=0.9,en;q=0.8", "nl-NL,nl;q=0.9,en;q=0.8", "pl-PL,pl;q=0.9,en-US;q=0.8,en;q=0.7", "tr-TR,tr;q=0.9",
    "sv-SE,sv;q=0.9,en;q=0.8", "en-IN,en;q=0.9,hi;q=0.8", "vi-VN,vi;q=0.9", "ar,en;q=0.9", "en", "fr-CA,fr;q=0.9",
    "de-CH,de;q=0.9,fr;q=0.8", "es-419,es;q=0.9", "*",
]  # fmt: skip
CHROME_ACCEPT_NAV = ("text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,image/apng,"
                     "*/*;q=0.8,application/signed-exchange;v=b3;q=0.7")
FF_ACCEPT_NAV = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
ASSET_ACCEPT = {
    "image": ("image/avif,image/webp,image/apng,image/svg+xml,image/*,*/*;q=0.8", "image/avif,image/webp,*/*",
              "image/webp,image/avif,image/jxl,image/heic,image/heic-sequence,video/*;q=0.8,image/png,image/svg+xml,image/*;q=0.8,*/*;q=0.5"),
    "style": ("text/css,*/*;q=0.1",) * 3, "script": ("*/*",) * 3, "font": ("*/*",) * 3,
}  # fmt: skip


def _chrome_ua(rng: Rng, platform: str) -> tuple[str, str]:
    v = rng.randrange(118, 132)
    oses = {"Windows": "Windows NT 10.0; Win64; x64", "macOS": "Macintosh; Intel Mac OS X 10_15_7",
            "Linux": "X11; Linux x86_64", "Android": f"Linux; Android {rng.randrange(10, 15)}; K"}
    mobile = " Mobile" if platform == "Android" else ""
    return f"Mozilla/5.0 ({oses[platform]}) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/{v}.0.0.0{mobile} Safari/537.36", str(v)


def _ch_ua(brand: str, v: str) -> str:
    return f'"{brand}";v="{v}", "Chromium";v="{v}", "Not_A Brand";v="24"'


def chromium(rng: Rng, mode: str, dest: str, edge: bool = False) -> list[tuple[str, str]]:
    platform = rng.pick(["Windows", "Windows", "macOS", "Linux", "Android"])
    ua, v = _chrome_ua(rng, platform)
    if edge:
        ua += f" Edg/{v}.0.0.0"
    brand = "Microsoft Edge" if edge else "Google Chrome"
    ch = [("sec-ch-ua", _ch_ua(brand, v)), ("sec-ch-ua-mobile", "?1" if platform == "Android" else "?0"),
          ("sec-ch-ua-platform", f'"{platform}"')]  # fmt: skip
    h: list[tuple[str, str]] = [("Connection", "keep-alive")]
    if mode == "navigate":
        if rng.chance(0.1):
            h.append(("Cache-Control", "max-age=0"))
        h += ch + [("Upgrade-Insecure-Requests", "1"), ("User-Agent", ua), ("Accept", CHROME_ACCEPT_NAV),
                   ("Sec-Fetch-Site", rng.pick(["none", "same-origin", "cross-site"])), ("Sec-Fetch-Mode", "navigate"),
                   ("Sec-Fetch-User", "?1"), ("Sec-Fetch-Dest", "document")]  # fmt: skip
    else:
        accept = ASSET_ACCEPT[dest][0] if dest in ASSET_ACCEPT else rng.pick(["application/json, text/plain, */*", "*/*", "application/json"])
        fetch_mode = "no-cors" if dest in ("image", "style", "script") else "cors"
        h += [ch[2], ("User-Agent", ua), ch[0], ch[1], ("Accept", accept), ("Sec-Fetch-Site", rng.pick(["same-origin", "same-site", "cross-site"])),
              ("Sec-Fetch-Mode", fetch_mode), ("Sec-Fetch-Dest", dest if dest in ASSET_ACCEPT else "empty")]  # fmt: skip
    h += [("Accept-Encoding", "gzip, deflate, br, zstd" if int(v) >= 123 else "gzip, deflate, br"),
          ("Accept-Language", rng.pick(ACCEPT_LANGUAGE))]  # fmt: skip
    return h


def firefox(rng: Rng, mode: str, dest: str) -> list[tuple[str, str]]:
    v = rng.randrange(115, 134)
    os_ = rng.pick(["Windows NT 10.0; Win64; x64", "X11; Linux x86_64", "X11; Ubuntu; Linux x86_64",
                    "Macintosh; Intel Mac OS X 10.15", "Android 14; Mobile"])  # fmt: skip
    accept = FF_ACCEPT_NAV if mode == "navigate" else (ASSET_ACCEPT[dest][2 if dest == "image" else 0] if dest in ASSET_ACCEPT else "*/*")
    h = [("User-Agent", f"Mozilla/5.0 ({os_}; rv:{v}.0) Gecko/20100101 Firefox/{v}.0"), ("Accept", accept),
         ("Accept-Language", rng.pick(ACCEPT_LANGUAGE)), ("Accept-Encoding", "gzip, deflate, br, zstd" if v >= 126 else "gzip, deflate, br"),
         ("Connection", "keep-alive")]  # fmt: skip
    if mode == "navigate":
        h += [("Upgrade-Insecure-Requests", "1"), ("Sec-Fetch-Dest", "document"), ("Sec-Fetch-Mode", "navigate"),
              ("Sec-Fetch-Site", rng.pick(["none", "same-origin", "cross-site"])), ("Sec-Fetch-User", "?1"), ("Priority", "u=0, i")]
    else:
        d = dest if dest in ASSET_ACCEPT else "empty"
        h += [("Sec-Fetch-Dest", d), ("Sec-Fetch-Mode", "no-cors" if d in ("image", "style", "script") else "cors"),
              ("Sec-Fetch-Site", "same-origin"), ("Priority", "u=4" if d == "image" else "u=1")]  # fmt: skip
    if rng.chance(0.2):
        h.append(("TE", "trailers"))
    return h


def safari(rng: Rng, mode: str, dest: str) -> list[tuple[str, str]]:
    v = rng.pick(["16.6", "17.4.1", "17.5", "18.0", "18.1"])
    if rng.chance(0.5):
        ua = f"Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/{v} Safari/605.1.15"
    else:
        ios = v.replace(".", "_")
        ua = f"Mozilla/5.0 (iPhone; CPU iPhone OS {ios} like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/{v} Mobile/15E148 Safari/604.1"
    accept = FF_ACCEPT_NAV if mode == "navigate" else (ASSET_ACCEPT[dest][2 if dest == "image" else 0] if dest in ASSET_ACCEPT else "*/*")
    d = "document" if mode == "navigate" else (dest if dest in ASSET_ACCEPT else "empty")
    return [("Accept", accept), ("Sec-Fetch-Site", "same-origin" if mode != "navigate" else rng.pick(["none", "same-origin"])),
            ("Sec-Fetch-Dest", d), ("Accept-Language", rng.pick(ACCEPT_LANGUAGE)),
            ("Sec-Fetch-Mode", "navigate" if mode == "navigate" else "cors"), ("User-Agent", ua),
            ("Accept-Encoding", "gzip, deflate, br"), ("Connection", "keep-alive")]  # fmt: skip


def _ver(rng: Rng, *choices: str) -> str:
    return rng.pick(choices)


def programmatic(rng: Rng, client: str) -> list[tuple[str, str]]:
    """Libraries, CLIs and mobile SDKs: their default headers (apps add an Accept and a few of their own)."""
    if client == "curl":
        return [("User-Agent", f"curl/{_ver(rng, '7.68.0', '7.81.0', '7.88.1', '8.4.0', '8.5.0', '8.7.1', '8.10.1')}"), ("Accept", "*/*")]
    if client == "wget":
        return [("User-Agent", f"Wget/{_ver(rng, '1.20.3', '1.21.2', '1.21.4')}"), ("Accept", "*/*"), ("Accept-Encoding", "identity"), ("Connection", "Keep-Alive")]
    if client == "requests":
        return [("User-Agent", f"python-requests/{_ver(rng, '2.28.2', '2.31.0', '2.32.3')}"), ("Accept-Encoding", "gzip, deflate"),
                ("Accept", "*/*"), ("Connection", "keep-alive")]  # fmt: skip
    if client == "httpx":
        return [("accept", "*/*"), ("accept-encoding", "gzip, deflate"), ("connection", "keep-alive"), ("user-agent", f"python-httpx/{_ver(rng, '0.25.2', '0.27.0', '0.28.1')}")]
    if client == "aiohttp":
        return [("Accept", "*/*"), ("Accept-Encoding", "gzip, deflate"), ("User-Agent", f"Python/3.{rng.randrange(9, 13)} aiohttp/{_ver(rng, '3.8.6', '3.9.5', '3.10.10')}")]
    if client == "go":
        return [("User-Agent", "Go-http-client/1.1" if rng.chance(0.8) else "Go-http-client/2.0"), ("Accept-Encoding", "gzip")]
    if client == "okhttp":
        return [("Connection", "Keep-Alive"), ("Accept-Encoding", "gzip"), ("User-Agent", f"okhttp/{_ver(rng, '3.14.9', '4.9.3', '4.12.0')}")]
    if client == "axios":
        return [("Accept", "application/json, text/plain, */*"), ("User-Agent", f"axios/{_ver(rng, '0.27.2', '1.6.8', '1.7.7')}"),
                ("Accept-Encoding", "gzip, compress, deflate, br"), ("Connection", "keep-alive")]  # fmt: skip
    if client == "node":
        return [("accept", "*/*"), ("accept-language", "*"), ("sec-fetch-mode", "cors"), ("user-agent", "node"), ("accept-encoding", "gzip, deflate")]
    if client == "java":
        if rng.chance(0.5):
            return [("User-Agent", f"Java-http-client/{_ver(rng, '11.0.21', '17.0.9', '21.0.2')}")]
        return [("User-Agent", f"Apache-HttpClient/{_ver(rng, '4.5.13', '4.5.14', '5.2.1')} (Java/{_ver(rng, '11.0.21', '17.0.9')})"),
                ("Accept-Encoding", "gzip,deflate"), ("Connection", "Keep-Alive")]  # fmt: skip
    if client == "dotnet":
        return [("traceparent", f"00-{rng.hexid(32)}-{rng.hexid(16)}-00")] if rng.chance(0.5) else []
    if client == "ios_app":
        app = rng.pick(["Shopfront", "Acme", "Pulse", "Tasky", "Notely"])
        if rng.chance(0.5):
            ua = f"{app}/{rng.randrange(100, 9000)} CFNetwork/{_ver(rng, '1410.0.3', '1494.0.7', '1568.100.1')} Darwin/{_ver(rng, '22.6.0', '23.4.0', '24.0.0')}"
        else:
            ua = f"{app}/{rng.randrange(1, 9)}.{rng.randrange(30)}.{rng.randrange(9)} (com.example.{app.lower()}; build:{rng.randrange(100, 999)}; iOS 17.{rng.randrange(7)}.0) Alamofire/5.9.1"
        return [("Accept", "application/json"), ("Accept-Encoding", "br;q=1.0, gzip;q=0.9, deflate;q=0.8"),
                ("Accept-Language", "en-US;q=1.0, fr-US;q=0.9"), ("User-Agent", ua)]  # fmt: skip
    if client == "android_app":
        dev = rng.pick(["Pixel 7 Build/UQ1A.240205.004", "SM-S911B Build/UP1A.231005.007", "M2101K6G Build/SKQ1.210908.001"])
        return [("User-Agent", f"Dalvik/2.1.0 (Linux; U; Android {rng.randrange(10, 15)}; {dev})"), ("X-App-Version", f"{rng.randrange(1, 9)}.{rng.randrange(40)}.0"),
                ("Accept-Encoding", "gzip"), ("Connection", "Keep-Alive")]  # fmt: skip
    raise KeyError(client)


BOTS = [
    "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)",
    "Mozilla/5.0 (Linux; Android 6.0.1; Nexus 5X Build/MMB29P) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/128.0.6613.137 Mobile Safari/537.36 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)",
    "Mozilla/5.0 (compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm)",
    "DuckDuckBot/1.1; (+http://duckduckgo.com/duckduckbot.html)",
    "Mozilla/5.0 (compatible; YandexBot/3.0; +http://yandex.com/bots)",
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_5) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/13.1.1 Safari/605.1.15 (Applebot/0.1; +http://www.apple.com/go/applebot)",
    "facebookexternalhit/1.1 (+http://www.facebook.com/externalhit_uatext.php)", "Twitterbot/1.0",
    "Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)",
    "Mozilla/5.0 (compatible; AhrefsBot/7.0; +http://ahrefs.com/robot/)",
    "Mozilla/5.0 (compatible; SemrushBot/7~bl; +http://www.semrush.com/bot.html)",
]  # fmt: skip
MONITORS = [
    "Mozilla/5.0+(compatible; UptimeRobot/2.0; http://www.uptimerobot.com/)", "Pingdom.com_bot_version_1.4_(http://www.pingdom.com/)",
    "kube-probe/1.29", "kube-probe/1.31", "ELB-HealthChecker/2.0", "GoogleHC/1.0", "Consul Health Check",
    "Prometheus/2.51.0", "Blackbox Exporter/0.25.0", "StatusCake_Pagespeed_Indev", "Datadog/Synthetics",
]  # fmt: skip

# --bare-clients: programs that send next to nothing. Load generators and one-line scripts with their own short
# header sets, and requests with no header but Host, or none at all (a balancer's check, a request typed by hand).
# In the default corpus every benign request carries a client's usual headers, and 144 training attacks for / carry
# at most one beside Host (protocol anomalies: TRACK /, FOOBAR /), so the default model blocks a bare GET / as a probe
# (bench/RESULTS.md). The hand-written check set bench/results/bare/bare-clients.jsonl names other tools than these.
BARE_TOOLS = ["hey/0.0.1", "oha/1.4.5", "k6/0.52.0 (https://k6.io/)", "fasthttp", "h2load nghttp2/1.59.0", "Vegeta",
              "Artillery (https://artillery.io)", "Gatling", "lua-resty-http/0.17.1 (Lua) ngx_lua/10026", "libcurl-agent/1.0",
              "autocannon/7.15.0", "bombardier/1.2.6", "Tsung", "drill"]  # fmt: skip
BARE_FORMS = Weighted({"none": 30, "close": 12, "accept": 10, "keepalive": 8, "tool": 40})


def bare(rng: Rng) -> list[tuple[str, str]]:
    form = BARE_FORMS.draw(rng)
    if form == "none":
        return []
    if form in ("close", "keepalive"):
        return [("Connection", "close" if form == "close" else "keep-alive")]
    if form == "accept":
        return [("Accept", "*/*")]
    h = [("User-Agent", rng.pick(BARE_TOOLS))]
    if rng.chance(0.4):
        h.append(("Accept-Encoding", "gzip"))
    if rng.chance(0.3):
        h.append(("Accept", "*/*"))
    return h


BROWSER = Weighted({"chrome": 50, "edge": 8, "firefox": 14, "safari": 22, "bot": 6})
PROGRAM = Weighted({"curl": 10, "wget": 2, "requests": 12, "httpx": 4, "aiohttp": 3, "go": 8, "okhttp": 6, "axios": 7,
                    "node": 5, "java": 6, "dotnet": 3, "ios_app": 12, "android_app": 10, "chrome": 8, "safari": 4})  # fmt: skip


def browser(rng: Rng, client: str, mode: str, dest: str) -> list[tuple[str, str]]:
    if client == "chrome":
        return chromium(rng, mode, dest)
    if client == "edge":
        return chromium(rng, mode, dest, edge=True)
    if client == "firefox":
        return firefox(rng, mode, dest)
    if client == "safari":
        return safari(rng, mode, dest)
    return bot(rng)


def bot(rng: Rng) -> list[tuple[str, str]]:
    ua = rng.pick(BOTS)
    h = [("Connection", "keep-alive"), ("Accept", FF_ACCEPT_NAV if rng.chance(0.6) else "*/*"), ("User-Agent", ua),
         ("Accept-Encoding", "gzip, deflate, br")]  # fmt: skip
    if "Googlebot" in ua:
        h.insert(2, ("From", "googlebot(at)googlebot.com"))
    return h


def monitor(rng: Rng) -> list[tuple[str, str]]:
    ua = rng.pick(MONITORS)
    h = [("User-Agent", ua), ("Accept", "*/*")]
    if ua.startswith("Prometheus"):
        h = [("User-Agent", ua), ("Accept", "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"),
             ("X-Prometheus-Scrape-Timeout-Seconds", "10")]  # fmt: skip
    return h + ([("Connection", "close")] if rng.chance(0.5) else [])


def headers(rng: Rng, mode: str, host: str, dest: str = "empty", client: str | None = None) -> tuple[str, list[tuple[str, str]]]:
    """(client, headers) for one request. Modes: navigate, asset, fetch, form, api, bot, monitor, bare."""
    if client is None:
        client = mode if mode in ("bot", "monitor", "bare") else (PROGRAM if mode == "api" else BROWSER).draw(rng)
    if client == "bare":
        h = bare(rng)
    elif client == "monitor":
        h = monitor(rng)
    elif client in ("chrome", "edge", "firefox", "safari", "bot"):
        h = browser(rng, client, "navigate" if mode in ("navigate", "form") else "sub", dest)
    else:
        h = programmatic(rng, client)
    h = [("Host", host)] + h
    if client in ("chrome", "edge") and rng.chance(0.35) or client == "httpx":
        h = [(k.lower(), v) for k, v in h]  # HTTP/2 clients send lower-case names; proxies keep them so
    return client, h
