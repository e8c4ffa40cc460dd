"""Everyday values that people and programs put into requests: names, addresses, e-mails, phones, prices,
dates, products, words. Shared by the benign generator and by the attack carriers, so a value's shape
never tells which label its request has.

Names deliberately include apostrophes, accents, hyphens and non-Latin scripts (O'Brien, Zoë, Łukasz):
a WAF that blocks them blocks real customers.
"""

from __future__ import annotations

import unicodedata

from engine.corpus.rand import Rng

FIRST = """James Mary Robert Patricia John Jennifer Michael Linda David Elizabeth William Barbara Richard
Susan Joseph Jessica Thomas Sarah Zoë Łukasz José François Søren Björn Małgorzata Şebnem Jürgen Siobhán
Chloé Renée Đorđe Inês Aoife Mohammed Priya Yuki Wei Olga Ahmet Fatima Kwame Lars Camille Mateo Sofía
Léa Noémie Zoltán Ewa Wojciech Anaïs Hélène Ángel Núria Pål Åsa Tomasz Joaquín Gökhan Dmitri Ксения
Анна 太郎 美咲 伟 芳 민준 서연 Aarav Ananya Nguyễn Thảo Oluwaseun Chidi Ngozi Mei-Ling Jean-Luc Anne-Marie
Mary-Kate D'Arcy Zuzana Radek Iñaki Maëlle Gaëlle Øystein Ása Kateřina Dagný Ilse Maeve Tadhg""".split()
LAST = """Smith Johnson Williams Brown Jones Garcia Miller Davis O'Brien D'Angelo O'Neill McDonald
García Müller Nowak Kowalski Núñez Dubois Rossi Nguyen Kim Tanaka Ivanova Öztürk Silva Jensen Hernández
D'Souza Smith-Jones Lefèvre Åström Żak Wiśniewski Dvořák Šimić Fernández Gonçalves Schäfer Weiß
Papadopoulos Mørk Björnsdóttir Ó_Súilleabháin van_der_Berg de_la_Cruz von_Trapp St._John Al-Farsi
Ben-David Mac_Giolla O'Connor-Reyes Иванов Петрова 田中 鈴木 王 李 김 박 Sharma Patel Okafor Adeyemi
Mbeki Chen Wang Yamamoto Lindqvist Jovanović Kovačević Horváth Nagy Popescu Andersson""".split()
LAST = [w.replace("_", " ") for w in LAST]
STREETS = """Baker Street|Rue de l'Église|Calle Mayor|Hauptstraße|ul. Marszałkowska|Amphitheatre Pkwy|
Via dell'Indipendenza|Av. Paulista|O'Connell St.|Main St|Elm Street|Friedrichstraße|Carrer de Mallorca|
Rua Augusta|Kungsgatan|Nørrebrogade|Rue du Faubourg Saint-Honoré|King's Road|Queen's Gate|
Boulevard Saint-Germain|Calle de Alcalá|Strada Nuova|5th Avenue|Sunset Blvd|Rue Sainte-Catherine""".replace("\n", "").split("|")
CITIES = """London|Paris|Berlin|Madrid|Kraków|São Paulo|Montréal|München|Zürich|Malmö|Reykjavík|Dublin|
New York|San Francisco|Tokyo|東京|Seoul|서울|Москва|Istanbul|İzmir|Düsseldorf|Köln|Göteborg|Ciudad de México|
Bogotá|Coeur d'Alene|Saint-Étienne|L'Aquila|Val-d'Or|'s-Hertogenbosch|Łódź|Brno|Bratislava|Cluj-Napoca|
Lagos|Nairobi|Mumbai|Bengaluru|Hà Nội|Sydney|Auckland|Toronto|Chicago|Austin|Lisboa|Porto|Athens""".replace("\n", "").split("|")
COUNTRIES = "US GB FR DE ES PL BR CA CH SE IS IE JP KR RU TR MX CO IT NL CZ SK RO NG KE IN VN AU NZ PT GR".split()
MAIL_DOMAINS = """gmail.com outlook.com yahoo.com yahoo.co.jp hotmail.fr web.de gmx.de orange.fr proton.me
icloud.com example.org example.com mail.ru naver.com qq.com company.example acme.io uni-heidelberg.de
student.example.edu posteo.de fastmail.com zoho.com libero.it wp.pl seznam.cz""".split()
WORDS = """account address advice album answer apple archive article artist autumn bag balance band bank
basket battery beach bed bicycle bike billing birthday blog board book boots bottle box bread budget
cable cake calendar camera campaign candle car card career cart case cat chair channel chart cheese
city class client clock cloud coat code coffee color comment company computer concert contract cookie
copy country coupon course cover cream customer dashboard data date deal delivery design desk device
dinner discount doctor document dog dress driver email energy engine event export family farm feature
file film filter flight flower folder food forest form garden gift glass group guide guitar hat health
history holiday home hotel house idea image invoice island jacket job journey kitchen lamp language
laptop lesson letter library light list lunch map market meeting member menu message model money month
movie music network news night note notebook number office order page paint paper park party password
payment people phone photo piano picture plan plant player pocket policy price printer product profile
project question radio recipe record report review river road room route sale salad school screen
search season service settings shirt shoe shop size sky sofa song sport spring stamp station store
story street summer support table tag task tea team ticket time tour town toy track train travel tree
trip update user vacation video village wallet watch water weather website week window winter wood
work world year""".split()
ADJ = """new used red blue green black white small large cheap premium organic wireless vintage classic
modern waterproof portable lightweight eco-friendly handmade italian french japanese mexican spicy
sweet fresh frozen digital smart quick easy best top free open secure fast annual monthly""".split()
PRODUCTS = """Men's Running Shoes – Size 10½|Ben & Jerry's Cookie Dough|AT&T Prepaid SIM|C++ Primer (5th ed.)|
100% Cotton T-Shirt|Samsung 27" Monitor|Levi's® 501 Original|Crème brûlée kit|Café de Colombia 500g|
Jamón Ibérico|Queso Manchego|Vino Rioja|Kids' Backpack (Blue/Green)|USB-C to USB-A adapter 3-pack|
Dr. Martens 1460|L'Oréal Paris Revitalift|Häagen-Dazs Vanilla|Nike Air Max 90 "Infrared"|
Tom & Jerry DVD box set|O'Reilly: Learning SQL, 3rd Edition|Wireless Mouse M185|Pokémon Scarlet|
Bose QC45 — Black|iPhone 15 Pro case|Kindle Paperwhite (16 GB)|Mom's Apple Pie|Size 8/10 dress|
50% Wool Scarf|Self-help: The 7 Habits|Kaffeemaschine für 2 Tassen|Łyżka drewniana 30cm|Tea for 2""".replace("\n", "").split("|")
LANGS = ["en", "en-US", "en-GB", "de", "fr", "es", "pt-BR", "it", "nl", "pl", "ja", "zh-CN", "ko", "ru", "tr", "sv"]
CURRENCIES = ["USD", "EUR", "GBP", "JPY", "PLN", "BRL", "CAD", "CHF", "SEK", "INR"]
TLDS = ["com", "org", "net", "io", "dev", "co.uk", "de", "fr", "app", "example"]


_TERMS = WORDS + ADJ


def first(rng: Rng) -> str:
    return rng.pick(FIRST)


def last(rng: Rng) -> str:
    return rng.pick(LAST)


def full_name(rng: Rng) -> str:
    return f"{first(rng)} {last(rng)}"


def _ascii(s: str) -> str:
    out = unicodedata.normalize("NFKD", s.lower().replace("ł", "l").replace("ø", "o").replace("ß", "ss"))
    return "".join(ch for ch in out if ch.isascii() and (ch.isalnum() or ch in ".-_")) or "user"


def username(rng: Rng) -> str:
    f, n = _ascii(first(rng)), _ascii(last(rng))
    style = rng.randrange(5)
    if style == 0:
        return f"{f}.{n}"
    if style == 1:
        return f"{f[0]}{n}{rng.randrange(100)}"
    if style == 2:
        return f"{f}_{rng.pick(WORDS)}"
    return f"{f}{n[:3]}{rng.randrange(1970, 2012)}" if style == 3 else f"{rng.pick(ADJ)}{rng.pick(WORDS)}{rng.randrange(1000)}"


def email(rng: Rng) -> str:
    user = username(rng)
    if rng.chance(0.1):
        user += "+" + rng.pick(WORDS)
    return f"{user}@{rng.pick(MAIL_DOMAINS)}"


def phone(rng: Rng) -> str:
    d = lambda n: "".join(str(rng.randrange(10)) for _ in range(n))  # noqa: E731
    return rng.call(
        lambda: f"+1 ({d(3)}) 555-{d(4)}", lambda: f"+44 20 {d(4)} {d(4)}", lambda: f"+33 6 {d(2)} {d(2)} {d(2)} {d(2)}",
        lambda: f"+49 30 {d(7)}", lambda: f"0{d(3)} {d(6)}", lambda: f"({d(3)}) {d(3)}-{d(4)} ext. {d(2)}", lambda: f"+81-3-{d(4)}-{d(4)}",
        lambda: f"+48 {d(3)} {d(3)} {d(3)}", lambda: f"{d(3)}.{d(3)}.{d(4)}", lambda: f"+55 11 9{d(4)}-{d(4)}",
    )  # fmt: skip


def street(rng: Rng) -> str:
    n, s = rng.randrange(1, 250), rng.pick(STREETS)
    return rng.call(lambda: f"{n} {s}", lambda: f"{s} {n}", lambda: f"{s}, {n}, {rng.randrange(1, 9)}º B", lambda: f"Apt #{rng.randrange(1, 40)}, {n} {s}")


def postcode(rng: Rng) -> str:
    return rng.call(lambda: f"{rng.randrange(10000, 99999)}", lambda: f"SW1A {rng.randrange(1, 9)}AA", lambda: f"{rng.randrange(10, 99)}-{rng.randrange(100, 999)}",
                    lambda: f"H2X {rng.randrange(1, 9)}Y{rng.randrange(1, 9)}", lambda: f"{rng.randrange(100, 999)} {rng.randrange(10, 99)}")  # fmt: skip


def city(rng: Rng) -> str:
    return rng.pick(CITIES)


def price(rng: Rng, formatted: bool = False) -> str:
    v = round(rng.loguniform(0.5, 5000), 2)
    if not formatted:
        return f"{v:.2f}"
    return rng.call(lambda: f"${v:,.2f}", lambda: f"€{v:,.2f}".replace(",", " "), lambda: f"{v:.2f} €", lambda: f"£{v:.2f}", lambda: f"¥{int(v * 100):,}", lambda: f"{v:.2f} zł")


def date(rng: Rng) -> str:
    y, m, d = rng.randrange(1950, 2027), rng.randrange(1, 13), rng.randrange(1, 29)
    return rng.call(lambda: f"{y}-{m:02d}-{d:02d}", lambda: f"{m:02d}/{d:02d}/{y}", lambda: f"{d:02d}.{m:02d}.{y}",
                    lambda: f"{y}-{m:02d}-{d:02d}T{rng.randrange(24):02d}:{rng.randrange(60):02d}:00Z")


def timestamp(rng: Rng, ms: bool = False) -> str:
    t = rng.randrange(1_600_000_000, 1_780_000_000)
    return str(t * 1000 + rng.randrange(1000)) if ms else str(t)


def uuid(rng: Rng) -> str:
    h = rng.hexid(32)
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{rng.pick('89ab')}{h[17:20]}-{h[20:]}"


def slug(rng: Rng, words: int | None = None) -> str:
    return "-".join(rng.choices(_TERMS, k=words or rng.randrange(1, 6)))


def title(rng: Rng) -> str:
    return " ".join(rng.choices(_TERMS, k=rng.randrange(2, 8))).capitalize()


def product(rng: Rng) -> str:
    return rng.pick(PRODUCTS) if rng.chance(0.5) else f"{rng.pick(ADJ).capitalize()} {rng.pick(WORDS)} {rng.pick(_SUFFIX)}".strip()


_SUFFIX = ["", "XL", "Pro", "v2", "2-pack", "(refurbished)", "Mini"]


def domain(rng: Rng) -> str:
    mid = "-" + rng.pick(WORDS) if rng.chance(0.25) else rng.pick(["", "hub", "ly"])
    return f"{rng.pick(['www.', 'blog.', 'shop.', 'docs.', 'app.', ''])}{rng.pick(WORDS)}{mid}.{rng.pick(TLDS)}"


def ipv4(rng: Rng, public: bool = True) -> str:
    if public:
        return f"{rng.pick([23, 34, 52, 66, 81, 89, 91, 104, 142, 151, 176, 185, 198, 203, 212])}.{rng.randrange(256)}.{rng.randrange(256)}.{rng.randrange(1, 255)}"
    return f"10.{rng.randrange(256)}.{rng.randrange(256)}.{rng.randrange(1, 255)}"
