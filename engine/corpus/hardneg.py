"""Generated hard negatives: benign text that uses attack vocabulary.

Search queries and sentences such as "union was a great select", "drop me a line", "Tom & Jerry",
"50% off", "C:\\Users\\me" or "a/b/../c" are ordinary user input. The first models blocked them
(MODEL-NOTES). Each template has an id; the id is the record's group, so whole templates are held out
for the test split.
"""

from __future__ import annotations

from engine.corpus import vocab
from engine.corpus.rand import Rng

# Search-box queries: attack keywords as ordinary words. {w} is a random noun, {n} a number.
QUERIES = """select dress|union jack flag|drop shipping suppliers|script writing course|alert sound iphone|exec chair ergonomic|
sql where clause tutorial|javascript alert box example|1 or 2 bedroom apartment|insert coin arcade|delete account|update bios asus|
cat food grain free|ls 400 lexus|rm 2000 camera|ping pong table|order by price|select all that apply|from paris to rome|
where to buy {w}|union station chicago|drop down menu css|script font free|table for 2|sleep 5 hours|wait for me lyrics|
benchmark results 2024|char broil grill|concat strings python|having a party ideas|group by month excel|null hypothesis meaning|
true or false quiz|1=1 meaning math|admin assistant jobs|root vegetables recipe|shell gas station near me|bash birthday party|
curl hair tutorial|wget vs curl|echo dot 5th gen|kill bill|chmod 755 meaning|sudo make me a sandwich|system of a down|
eval function javascript|exec summary template|import export business|process map template|php tutorial for beginners|
python eval vs exec|html script tag defer|onload event|svg icons free|iframe embed youtube|document cookie consent|
window location href|the alert was issued|union pacific stock|select comfort mattress|drop in the ocean|
"{w}" -{w}|{w} & {w}|{w} + {w}|{w} vs {w}|{w}'s {w}|{n}% off {w}|{w} <3|C# tutorial|F# vs OCaml|.NET 8 {w}|
<b>bold</b> html|a < b and b > c|x = y + 1|i <3 {w}|rock 'n' roll|don't stop|O'Reilly {w}|Tom & Jerry|AT&T {w}|
what is select * from|sql injection prevention|xss prevention cheat sheet|owasp top 10|cross site scripting explained|
how to prevent csrf|path traversal java fix|log4j vulnerability patch|ldap filter syntax|xpath contains text|
mongodb $regex query|$gt $lt mongodb|template engine jinja2 loops|${w} variable bash|{{w}} mustache|%s in python""".replace("\n", "").split("|")

# Sentences for comments, messages and descriptions.
SENTENCES = """Union was a great select for the team this year.|Drop me a line at {email} if anything changes.|
Please select all that apply and press Submit.|I'd like to union our two accounts into one.|Where can I find the {w} in your store?|
Select your size from the drop-down, then click "Add to cart".|Tom & Jerry is still my favourite cartoon <3|
50% off everything until Sunday -- don't miss it!|The file is in C:\\Users\\{user}\\Documents\\{w}.docx|
Use ../ to go up one directory, e.g. a/b/../c is the same as a/c.|Is 1=1 always true? Asking for my math homework.|
The script for tonight's play is on the table.|Alert: your order #{n} has shipped!|Exec summary attached, see page 3.|
We drove from {city} to {city} or so.|Or 1 more thing: the cable was too short.|The table was dropped by the movers, it's scratched.|
Let's sleep on it and decide tomorrow.|I waited for 5 seconds and then the page loaded.|Can you update my address to {street}?|
Delete my old address please, I moved to {city}.|My name is {name} and I can't log in since Tuesday.|
The "Select" button doesn't work on Safari.|Price was $19.99 -- now it's $24.99?! Why?|I give it 5/5 -- would buy again :)|
Great product; fast shipping; 10/10.|Use <strong>bold</strong> for emphasis in your bio.|Hi {name}, thanks for your order (ref: {n}).|
Where clause? I just want my money back!|It says "Error: null" when I click save.|The admin said to drop the ticket here.|
Our shell company -- just kidding, we're a bakery.|I ran `ls` and the file was there, but the app can't see it.|
Please don't echo my password back in the e-mail.|Kill the lights and hit play.|Insert the card, then enter your PIN.|
It's a 3' x 5' rug; colour "sand".|Meeting @ 5pm in room #{n} -- bring {w}s.|{name} wrote: > thanks! >> you're welcome|
I <3 this {w}!!!|x < 10 && y > 20 is what the docs say.|See https://{domain}/{w}?ref={w} for details.|
Our SSID is "{w}_5G" & the password is on the fridge.|Bought 2 x {product} @ {price} each.|
Ordered on {date}, still not here. Order {n}.|Happy birthday {name}!!! 🎉🎂|Merci beaucoup, c'était parfait !|
¿Dónde está mi pedido? Lo compré el {date}.|Vielen Dank für die schnelle Lieferung – alles bestens!|
ご注文ありがとうございます。{n}番の荷物は明日届きます。|Спасибо, всё пришло вовремя.|
Can I pay with PayPal or only by card?|
Is the {w} dishwasher safe? The label says "hand wash only".|Re: Re: Fwd: {w} meeting notes|
I tried "{w}" and "{w}" but neither worked.|N.B. the path is /home/{user}/projects/{w} on my machine.|
Admins: please pin this thread.|@{user} can you take a look? cc @{user}|#{w} #{w} #{w}|
Page 2 of 10 -- next >>|<< back to results|Ratings: ★★★★☆ (4/5)|The & sign breaks my name in your form: {name} & Co.""".replace("\n", "").split("|")


def fill(rng: Rng, template: str) -> str:
    """Fill the placeholders of a template with everyday values."""
    out = template
    fills = {"{w}": lambda: rng.pick(vocab.WORDS), "{n}": lambda: str(rng.randrange(2, 99999)), "{email}": lambda: vocab.email(rng),
             "{user}": lambda: vocab.username(rng), "{city}": lambda: vocab.city(rng), "{street}": lambda: vocab.street(rng),
             "{name}": lambda: vocab.full_name(rng), "{domain}": lambda: vocab.domain(rng), "{product}": lambda: vocab.product(rng),
             "{price}": lambda: vocab.price(rng, True), "{date}": lambda: vocab.date(rng)}  # fmt: skip
    for key, fn in fills.items():
        while key in out:
            out = out.replace(key, fn(), 1)
    return out


def templates() -> list[tuple[str, str]]:
    """(template id, template) for every hard-negative template: the ids are the split groups."""
    return [(f"hq{i:03d}", t) for i, t in enumerate(QUERIES)] + [(f"hs{i:03d}", t) for i, t in enumerate(SENTENCES)]
