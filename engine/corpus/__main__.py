"""`python -m engine.corpus --data ../shared/data --out work/corpus [--seed 1] [--scale 1.0] [--lookalikes] [--image-uploads]
[--xml-values] [--site-layouts] [--mounts] [--legacy-folders] [--oauth-flows] [--bare-clients] [--synth-payloads]`:
build the training corpus (train.jsonl, test.jsonl, evasion.jsonl, summary.json) and print its summary table."""

from __future__ import annotations

import argparse
import time

from engine.corpus.build import build
from engine.corpus.summary import table


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m engine.corpus", description=__doc__)
    ap.add_argument("--data", default="../shared/data", help="folder of the shared data files")
    ap.add_argument("--out", default="work/corpus", help="output folder")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--scale", type=float, default=1.0, help="multiplies every count (0.01 for a quick build)")
    ap.add_argument("--lookalikes", action="store_true",
                    help="add generated lookalikes to the benign side (joined phrases, command questions, opaque "
                         "tokens, health and status checks; engine.corpus.lookalikes); the default bundle's corpus "
                         "is built without them")
    ap.add_argument("--image-uploads", action="store_true",
                    help="uploaded images as tools write them: SVG icons, GIFs, ICO bitmaps, PNG and JPEG with metadata "
                         "(engine.corpus.images), for benign and attack uploads alike; the default bundle's corpus has "
                         "bare PNG and JPEG bytes")
    ap.add_argument("--xml-values", action="store_true",
                    help="parameter payloads go into XML bodies' element text and attributes too (engine.corpus.xmlvalues): "
                         "SOAP, XML-RPC, XML orders, Atom entries; the default bundle's corpus has none there")
    ap.add_argument("--site-layouts", action="store_true",
                    help="static assets in many more framework and CMS layouts (Nuxt, SvelteKit, Astro, Webpacker, Drupal, "
                         "Shopify, ...) and pages saved from CMS editors (WordPress, Drupal, Joomla, MediaWiki, Ghost, "
                         "Confluence, e-mail templates, ...), benign and carrying payloads (engine.corpus.scenes_site)")
    ap.add_argument("--mounts", action="store_true",
                    help="sites served from a folder: assets, pages and searches under /public/, /wordpress/, /app/, /shop/, "
                         "..., the folders scanner probes use too, benign and carrying payloads (engine.corpus.scenes_site.mounted)")
    ap.add_argument("--legacy-folders", action="store_true",
                    help="CGI applications under /cgi-bin/ (Koha, Mailman, Bugzilla, gitweb, Nagios, ViewVC, Sympa, Movable "
                         "Type, AWStats) and sites under /site/, /include(s)/ and /components/: folders only probes use in "
                         "the default corpus, benign and carrying payloads (engine.corpus.scenes_site)")
    ap.add_argument("--oauth-flows", action="store_true",
                    help="identity-provider traffic: OAuth 2.0 and OpenID Connect authorisation, token, PAR, logout, "
                         "revocation and registration requests and SAML responses, with https, loopback (RFC 8252), "
                         "localhost, private-use-scheme and out-of-band redirect URIs, benign and carrying payloads in their "
                         "other parameters (engine.corpus.scenes_auth); the default corpus has none of these redirect URIs")
    ap.add_argument("--bare-clients", action="store_true",
                    help="requests from programs that send next to nothing: no header but Host, or none at all, or a load "
                         "generator's short set (health checks, a root page asked for by hand, load tests), benign and "
                         "carrying payloads (engine.corpus.profiles.bare); in the default corpus only attacks come so bare")
    ap.add_argument("--synth-payloads", nargs="?", const="share", choices=("share", "extra"), default=False,
                    help="NoSQL, LDAP, SSTI and SSRF payloads written from grammars (engine.corpus.synth), added to the "
                         "training split only: the held-out files stay those of the build without it. `share` (the "
                         "default): they take part of their class's requests; `extra`: they get as many on top, and "
                         "the data's own payloads keep all of theirs")
    args = ap.parse_args(argv)
    t0 = time.time()
    result = build(args.data, args.out, seed=args.seed, scale=args.scale, lookalikes=args.lookalikes, image_uploads=args.image_uploads,
                   xml_values=args.xml_values, site_layouts=args.site_layouts, mounts=args.mounts,
                   legacy_folders=args.legacy_folders, oauth_flows=args.oauth_flows, bare_clients=args.bare_clients,
                   synth_payloads=args.synth_payloads)
    print(table(result, time.time() - t0))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
