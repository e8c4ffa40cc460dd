"""Train the byte-level BPE tokenizer (Hugging Face `tokenizers`) on canonical request texts.

Byte-level, so any byte sequence an attacker sends has an encoding and nothing maps to [UNK]. The mask
markers of the canonical text ([ID], [NUM], [B64], ...) are atomic special tokens.
"""

from __future__ import annotations

from typing import Iterable

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from engine.model import SPECIAL_TOKENS


def train_tokenizer(texts: Iterable[str], vocab_size: int = 8192, min_frequency: int = 3) -> Tokenizer:
    tok = Tokenizer(models.BPE(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    for i, t in enumerate(SPECIAL_TOKENS):
        assert tok.token_to_id(t) == i, f"special token {t} must have id {i}"
    return tok
