"""The training corpus: labelled HTTP requests built from ../shared/data and a benign traffic generator.

    build.py      the build: groups, splits, generators, output files, summary
    io.py         records on disk, `read_records`, `record_features`
    sources.py    the shared data files          split.py   groups and held-out test groups
    plan.py       counts and rebalancing         pools.py   per-split data pools
    attacks.py    payloads embedded into ordinary requests (embed_parts.py: targets, headers, bodies, files)
    csic.py       CSIC 2010 and the access log   evasion.py the evasion set
    benign.py     the benign traffic generator (api_traffic.py: benign_api records; hardneg.py: hard negatives;
                  lookalikes.py: joined phrases, command questions, opaque tokens)
    scenes*.py    the request shapes both sides share; slots.py puts a value into one of their fields
    draft.py, encode.py, profiles.py, session.py, paths.py, params.py, vocab.py, raw.py, rand.py: building blocks
"""

from engine.corpus.io import read_records, record_features

__all__ = ["read_records", "record_features"]
