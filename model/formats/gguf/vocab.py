"""The vocabulary of a GGUF file (``tokenizer.ggml.*``), built as a ``tokenizers`` tokenizer.

``tokenizer.ggml.tokens`` lists every token in id order, ``tokenizer.ggml.token_type`` says what
each is (1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte), and
``tokenizer.ggml.model`` how text becomes tokens:

- ``llama``: SentencePiece-style BPE, as llama.cpp's ``llm_tokenizer_spm``. Spaces are written
  ``▁``, a ``▁`` goes before the text (``tokenizer.ggml.add_space_prefix``, default true), then
  adjacent pieces merge by the merged piece's ``tokenizer.ggml.scores`` (highest first,
  :mod:`model.tokens.merges`); normal pieces only (control, unused and byte tokens are never
  merged), and a character that is no piece becomes its UTF-8 bytes as ``<0xNN>`` tokens (byte
  fallback), or the unknown token when the file has no byte tokens.
- ``gpt2``: GPT-2-style byte-level BPE with ``tokenizer.ggml.merges`` ("a b", in rank order) and
  the pre-tokenizer that ``tokenizer.ggml.pre`` names (:data:`PRE_TOKENIZERS`: the regex that
  splits a text into words before the merges, as llama.cpp's ``llm_tokenizer_bpe``; Qwen2's also
  applies NFC first, as Qwen's own tokenizer.json does).

Control tokens are special tokens and user-defined ones added tokens (found whole in a text).
The text starts with ``tokenizer.ggml.bos_token_id`` when ``tokenizer.ggml.add_bos_token`` says
so (default: true for ``llama``, false for ``gpt2``, as llama.cpp). A file whose model is
``none`` or that has no tokens has no vocabulary; any other model is refused, naming it.
"""

from __future__ import annotations

from tokenizers import AddedToken, Regex, decoders, normalizers, pre_tokenizers, processors
from tokenizers import Tokenizer as HFTokenizer
from tokenizers.models import BPE

from model.formats.base import CheckpointError, fail
from model.formats.gguf.file import GGUFFile
from model.core.plain import clip, short_repr
from model.tokens.merges import merges_by_score
from model.tokens.tokenizer import Tokenizer

NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6
SPACE = "▁"  # SentencePiece's spelling of a space (U+2581)
_GPT2 = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
_QWEN2 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+"
          r"|\s+(?!\S)|\s+")
_LLAMA3 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
           r"|\s*[\r\n]+|\s+(?!\S)|\s+")
#: ``tokenizer.ggml.pre`` -> (regex, digits one by one first, NFC first, ignore_merges): llama.cpp's
#: groups of pre-tokenizer names that share one regex (llama-vocab.cpp).
PRE_TOKENIZERS = {
    **dict.fromkeys(("gpt-2", "gpt2", "phi-2", "mpt", "olmo", "jais", "roberta-bpe"), (_GPT2, False, False, False)),
    **dict.fromkeys(("qwen2", "deepseek-r1-qwen"), (_QWEN2, False, True, False)),
    **dict.fromkeys(("llama3", "llama-v3", "llama-bpe"), (_LLAMA3, False, False, True)),
    **dict.fromkeys(("smollm", "starcoder", "refact", "command-r", "codeshell"), (_GPT2, True, False, False)),
}
MODELS = {"llama": "SentencePiece-style BPE with scores", "gpt2": "GPT-2-style byte-level BPE with merges"}


def _types(gf: GGUFFile, n: int) -> list[int]:
    types = gf.array("tokenizer.ggml.token_type", "integer")
    if types is None:
        return [NORMAL] * n
    if len(types) != n:
        raise gf.error("tokenizer.ggml.token_type", f"has {len(types)} entries for {n} tokens")
    return [int(t) for t in types]


def _unique(gf: GGUFFile, tokens: list[str]) -> dict[str, int]:
    vocab: dict[str, int] = {}
    for i, token in enumerate(tokens):
        if vocab.setdefault(token, i) != i:
            raise fail(gf.path, f"tokenizer.ggml.tokens: tokens {vocab[token]} and {i} are both {short_repr(token)}")
    return vocab


def _token_id(gf: GGUFFile, key: str, n: int) -> int | None:
    token_id = gf.integer(key)
    if token_id is not None and token_id >= n:
        raise gf.error(key, f"not one of the {n} tokens")
    return token_id


def _spm(gf: GGUFFile, tokens: list[str], types: list[int]) -> HFTokenizer:
    """llama.cpp's SentencePiece-style BPE (see the module docstring)."""
    scores = gf.array("tokenizer.ggml.scores", "number")
    if scores is None or len(scores) != len(tokens):
        raise gf.error("tokenizer.ggml.scores", f"a SentencePiece vocabulary needs one score per token ({len(tokens)})")
    texts = [t if kind in (NORMAL, 0) else None for t, kind in zip(tokens, types)]
    merges = [(tokens[a], tokens[b]) for _, a, b in merges_by_score(texts, [float(s) for s in scores])]
    unk_id = _token_id(gf, "tokenizer.ggml.unknown_token_id", len(tokens))
    unk_id = unk_id if unk_id is not None else next((i for i, k in enumerate(types) if k == UNKNOWN), None)
    unk = tokens[unk_id] if unk_id is not None else None
    hf = HFTokenizer(BPE(vocab=_unique(gf, tokens), merges=merges, unk_token=unk, fuse_unk=False,
                         byte_fallback=BYTE in types))
    replace = normalizers.Replace(" ", SPACE)
    prefix = gf.flag("tokenizer.ggml.add_space_prefix", True)
    hf.normalizer = normalizers.Sequence([normalizers.Prepend(SPACE), replace]) if prefix else replace
    steps = [decoders.Replace(SPACE, " "), decoders.ByteFallback(), decoders.Fuse()]
    hf.decoder = decoders.Sequence(steps + ([decoders.Strip(" ", 1, 0)] if prefix else []))
    return hf


def _bpe(gf: GGUFFile, tokens: list[str]) -> HFTokenizer:
    """GPT-2-style byte-level BPE with the file's merges and pre-tokenizer (see the module docstring)."""
    pre = gf.string("tokenizer.ggml.pre", "gpt-2")
    if pre not in PRE_TOKENIZERS:
        raise gf.error("tokenizer.ggml.pre", f"not a pre-tokenizer this app builds (it builds {', '.join(PRE_TOKENIZERS)})")
    regex, digits, nfc, ignore_merges = PRE_TOKENIZERS[pre]
    vocab = _unique(gf, tokens)
    merges = []
    for n, merge in enumerate(gf.array("tokenizer.ggml.merges", "string") or []):
        pair = merge.split(" ")
        if len(pair) != 2 or pair[0] not in vocab or pair[1] not in vocab or pair[0] + pair[1] not in vocab:
            raise fail(gf.path, f"tokenizer.ggml.merges entry {n} ({short_repr(merge)}) is not two tokens that make a token")
        merges.append((pair[0], pair[1]))
    hf = HFTokenizer(BPE(vocab=vocab, merges=merges, ignore_merges=ignore_merges))
    if nfc:
        hf.normalizer = normalizers.NFC()
    split = [pre_tokenizers.Digits(individual_digits=True)] if digits else []
    split.append(pre_tokenizers.Split(Regex(regex), behavior="isolated"))
    hf.pre_tokenizer = pre_tokenizers.Sequence(split + [pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    hf.decoder = decoders.ByteLevel()
    return hf


def _add_specials(hf: HFTokenizer, tokens: list[str], types: list[int]) -> None:
    """Control tokens as special tokens, user-defined ones as added tokens (both matched whole)."""
    hf.add_special_tokens([AddedToken(t, special=True, normalized=False)
                           for t, kind in zip(tokens, types) if kind == CONTROL])
    hf.add_tokens([AddedToken(t, special=False, normalized=False)
                   for t, kind in zip(tokens, types) if kind == USER_DEFINED])


def _add_bos(gf: GGUFFile, hf: HFTokenizer, tokens: list[str], default: bool) -> None:
    if not gf.flag("tokenizer.ggml.add_bos_token", default):
        return
    bos_id = _token_id(gf, "tokenizer.ggml.bos_token_id", len(tokens))
    if bos_id is None:
        raise fail(gf.path, "tokenizer.ggml.add_bos_token is true but the file has no tokenizer.ggml.bos_token_id")
    hf.post_processor = processors.TemplateProcessing(single=[tokens[bos_id], "$A"],
                                                      special_tokens=[(tokens[bos_id], bos_id)])


def gguf_tokenizer(gf: GGUFFile) -> Tokenizer | None:
    """The file's tokenizer, or None when it has none (``tokenizer.ggml.model`` absent or ``none``).

    Returns
    -------
    Tokenizer or None
        Its ids are the file's token ids (as many as ``tokenizer.ggml.tokens``).

    Raises
    ------
    CheckpointError
        For another tokenizer model or pre-tokenizer (naming it), or keys that do not fit
        together (token types or scores of another length, a merge of unknown tokens, two tokens
        with one text, a BOS outside the vocabulary).
    """
    model = gf.string("tokenizer.ggml.model", "none")
    tokens = gf.array("tokenizer.ggml.tokens", "string")
    if model == "none" or not tokens:
        return None
    if model not in MODELS:
        raise gf.error("tokenizer.ggml.model", "not a vocabulary this app builds (it builds "
                       + " and ".join(f"{k} ({v})" for k, v in MODELS.items()) + ")")
    types = _types(gf, len(tokens))
    try:
        hf = _spm(gf, tokens, types) if model == "llama" else _bpe(gf, tokens)
        _add_specials(hf, tokens, types)
        _add_bos(gf, hf, tokens, default=model == "llama")
        return Tokenizer(hf)
    except CheckpointError:
        raise
    except Exception as exc:  # tokenizers' own Exceptions, and the Tokenizer's ValueError (it fails on text, ...)
        raise fail(gf.path, f"its vocabulary (tokenizer.ggml.*) cannot be used ({clip(str(exc))})") from exc
