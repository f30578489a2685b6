"""A corpus of damaged files, one builder per kind of damage, for every format the app opens.

Each builder writes its file(s) under a temporary folder and returns a :class:`Damaged`: what to
open (and with which :func:`model.checkpoint.load_any` options), the file the message must name
first, and a pattern of the cause it must give. ``tests/test_bad_files.py`` opens each with
``load_any`` and ``python -m model.trace``; ``tests/test_bad_files_app.py`` opens some in the app.
The pickles that would make a loader walk forever are written opcode by opcode (building them in
Python would itself never end).
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
import struct
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from model.checkpoint import save_as
from model.tokens.tokenizer import train_word_tokenizer

FIX = Path(__file__).parent / "fixtures"
NANO, META = FIX / "interop" / "ckpt_nanogpt.pt", FIX / "interop" / "nanogpt_shakespeare_char_meta.pkl"
RASCHKA, RASCHKA_SIDECAR = FIX / "interop" / "ckpt_raschka.pth", FIX / "interop" / "ckpt_raschka_config.json"
LLAMA2C = FIX / "arch" / "llama2c-v0"
HF = FIX / "arch"


@dataclass
class Damaged:
    """A damaged input: open ``path`` with ``options``; the message starts ``name + ":"`` and matches ``cause``."""

    path: Path
    name: str
    cause: str
    options: dict = field(default_factory=dict)


CORPUS: dict[str, Callable[[Path], Damaged]] = {}


def damaged(kind: str):
    def register(build: Callable[[Path], Damaged]) -> Callable[[Path], Damaged]:
        CORPUS[kind] = build
        return build
    return register


# ---------------------------------------------------------------- pickles that never finish


def tuple_bomb(levels: int = 64) -> bytes:
    """Opcodes (no PROTO/STOP) leaving a tuple nested ``levels`` deep whose two items are one
    shared tuple: 2^levels values to hash; memo slots 0..levels."""
    out = b"K\x01\x85q\x00"  # BININT1 1, TUPLE1, BINPUT 0
    for i in range(levels):
        out += b"h" + bytes([i]) + b"h" + bytes([i]) + b"\x86q" + bytes([i + 1])  # GET i, GET i, TUPLE2, PUT
    return out


def dict_key_bomb() -> bytes:
    """A protocol-2 pickle of a dict whose key is :func:`tuple_bomb`: hashing it never ends."""
    return b"\x80\x02}" + tuple_bomb() + b"K\x01s."


def shared_list_meta(levels: int = 17, width: int = 10) -> bytes:
    """A 0.5 kB meta.pkl ``{"itos": l}``, l made of lists that hold one shared list ``width`` times,
    ``levels`` deep: 10^17 values for a walk, no class or function anywhere."""
    out = b"\x80\x02}X\x04\x00\x00\x00itos]q\x00K\x00a"  # {, "itos", [0] as memo 0
    for i in range(levels):
        out += b"0]q" + bytes([i + 1]) + b"(" + (b"h" + bytes([i])) * width + b"e"  # POP, [memo i] * width
    return out + b"s."


# ---------------------------------------------------------------- helpers


def native_file(tmp: Path, name: str = "model.safetensors", *, metadata=None, tensors=None) -> Path:
    """The tiny seeded model as our .safetensors, its metadata and tensors changed by the callables."""
    from conftest import make_tiny_checkpoint

    tok = train_word_tokenizer(["the cat sat on the mat ."], 64)
    good = tmp / "good.safetensors"
    if not good.exists():
        save_as(make_tiny_checkpoint(tok), good)
    with safe_open(str(good), framework="pt") as f:
        meta = dict(f.metadata())
    ts = load_file(str(good))
    out = tmp / name
    save_file(tensors(ts) if tensors else ts, str(out), metadata=metadata(meta) if metadata else meta)
    return out


def nanogpt_file(tmp: Path, change, name: str = "ckpt.pt") -> Path:
    """The nanoGPT fixture with ``change(obj)`` applied to what torch.load gives."""
    obj = torch.load(NANO, weights_only=True)
    change(obj)
    torch.save(obj, tmp / name)
    return tmp / name


def nano_meta(tmp: Path, data: bytes) -> Damaged:
    shutil.copy(NANO, tmp / "ckpt.pt")
    (tmp / "meta.pkl").write_bytes(data)
    return Damaged(tmp / "ckpt.pt", "meta.pkl", "")


def raschka_file(tmp: Path, change, name: str = "model.pth") -> Path:
    state = torch.load(RASCHKA, weights_only=True)
    change(state)
    torch.save(state, tmp / name)
    return tmp / name


def hf_folder(tmp: Path, family: str = "hf-gpt2") -> Path:
    return Path(shutil.copytree(HF / family, tmp / family))


def word_level_tokenizer_json(unk: str) -> str:
    """A word-level tokenizer.json for the nanoGPT fixture's 65 rows whose unknown-word token is ``unk``."""
    from tokenizers import Tokenizer as HFTokenizer
    from tokenizers import pre_tokenizers
    from tokenizers.models import WordLevel

    vocab = {("<unk>" if i == 0 else f"w{i}"): i for i in range(65)}  # "<unk>" is in it, another unk is not
    hf = HFTokenizer(WordLevel(vocab=vocab, unk_token=unk))
    hf.pre_tokenizer = pre_tokenizers.Whitespace()
    return hf.to_str()


# ---------------------------------------------------------------- our own .safetensors


@damaged("config JSON nested 100,000 levels")
def _(tmp):
    deep = "[" * 100_000 + "]" * 100_000
    return Damaged(native_file(tmp, metadata=lambda m: {**m, "config": deep}), "model.safetensors", "bad config")


@damaged("config JSON nested 10,000 levels within the size bound")
def _(tmp):
    deep = '{"a":' * 10_000 + "1" + "}" * 10_000
    return Damaged(native_file(tmp, metadata=lambda m: {**m, "config": deep}), "model.safetensors",
                   "bad config: JSON nested deeper than 4 levels")


@damaged("vocab_padding '²' (str.isdigit passes, int() fails)")
def _(tmp):
    return Damaged(native_file(tmp, metadata=lambda m: {**m, "vocab_padding": "²"}), "model.safetensors",
                   "bad vocab_padding '²'")


@damaged("vocab_padding of 5,000 digits")
def _(tmp):
    return Damaged(native_file(tmp, metadata=lambda m: {**m, "vocab_padding": "9" * 5000}), "model.safetensors",
                   "bad vocab_padding '9999")


@damaged("tokenizer metadata whose unknown-word token is not in its vocabulary")
def _(tmp):
    text = word_level_tokenizer_json("<missing>")
    return Damaged(native_file(tmp, metadata=lambda m: {**m, "tokenizer": text}), "model.safetensors",
                   "bad tokenizer: .*unknown-word token '<missing>' is not in its vocabulary")


@damaged("tokenizer metadata nested 100,000 levels")
def _(tmp):
    deep = '{"type":"Sequence","normalizers":[' * 100_000 + '{"type":"Lowercase"}' + "]}" * 100_000
    text = json.loads(word_level_tokenizer_json("<unk>"))
    text = json.dumps(text).replace('"normalizer": null', '"normalizer": ' + deep)
    return Damaged(native_file(tmp, metadata=lambda m: {**m, "tokenizer": text}), "model.safetensors",
                   "bad tokenizer: .*recursion limit")


@damaged("safetensors header with a huge shape")
def _(tmp):
    header = b'{"w": {"dtype": "F32", "shape": [1000000000, 1000000000], "data_offsets": [0, 16]}}'
    (tmp / "huge.safetensors").write_bytes(struct.pack("<Q", len(header)) + header + b"\0" * 16)
    return Damaged(tmp / "huge.safetensors", "huge.safetensors", "not a readable safetensors file")


@damaged("our .safetensors cut in its tensors")
def _(tmp):
    data = native_file(tmp).read_bytes()
    (tmp / "cut.safetensors").write_bytes(data[: len(data) - 100])
    return Damaged(tmp / "cut.safetensors", "cut.safetensors", "not a readable safetensors file")


@damaged("a weight of integers")
def _(tmp):
    path = native_file(tmp, tensors=lambda t: {**t, "ln_f.weight": t["ln_f.weight"].to(torch.int64)})
    return Damaged(path, "model.safetensors", "tensor ln_f.weight has dtype torch.int64, expected a float type")


# ---------------------------------------------------------------- nanoGPT


@damaged("nanoGPT wte 1-D")
def _(tmp):
    path = nanogpt_file(tmp, lambda o: o["model"].update({"transformer.wte.weight": torch.zeros(10)}))
    return Damaged(path, "ckpt.pt", r"transformer.wte.weight has shape \(10,\), expected a matrix")


@damaged("nanoGPT wpe 0-D")
def _(tmp):
    path = nanogpt_file(tmp, lambda o: o["model"].update({"transformer.wpe.weight": torch.tensor(1.0)}))
    return Damaged(path, "ckpt.pt", r"transformer.wpe.weight has shape \(\), expected a matrix")


@damaged("nanoGPT wte a 10^6 x 10^6 view of one value")
def _(tmp):
    path = nanogpt_file(tmp, lambda o: o["model"].update({"transformer.wte.weight": torch.zeros(1).expand(10**6, 10**6)}))
    return Damaged(path, "ckpt.pt", r"transformer.wte.weight is a tensor of shape \(1000000, 1000000\) whose data holds only 1 values")


@damaged("nanoGPT weight that is a sparse tensor")
def _(tmp):
    path = nanogpt_file(tmp, lambda o: o["model"].update({"transformer.ln_f.weight": torch.ones(64).to_sparse()}))
    return Damaged(path, "ckpt.pt", "transformer.ln_f.weight is a sparse_coo tensor")


@damaged("nanoGPT state dict with a key that is not a name")
def _(tmp):
    path = nanogpt_file(tmp, lambda o: o["model"].update({7: torch.zeros(1)}))
    return Damaged(path, "ckpt.pt", "has a key 7 that is not a name")


@damaged("nanoGPT state dict entry that is not a tensor")
def _(tmp):
    path = nanogpt_file(tmp, lambda o: o["model"].update({"transformer.ln_f.weight": [1.0] * 64}))
    return Damaged(path, "ckpt.pt", "entry 'transformer.ln_f.weight' of the nanoGPT state_dict is not a tensor")


@damaged("nanoGPT model_args n_head '²'")
def _(tmp):
    path = nanogpt_file(tmp, lambda o: o["model_args"].update({"n_head": "²"}))
    return Damaged(path, "ckpt.pt", r"n_heads '²' \(model_args\) does not divide d_model 64")


@damaged("nanoGPT ckpt.pt cut in half")
def _(tmp):
    (tmp / "ckpt.pt").write_bytes(NANO.read_bytes()[: NANO.stat().st_size // 2])
    return Damaged(tmp / "ckpt.pt", "ckpt.pt", "torch cannot read this file")


@damaged("pickle header then garbage")
def _(tmp):
    (tmp / "ckpt.pt").write_bytes(b"\x80\x02" + bytes(range(256)) * 4)
    return Damaged(tmp / "ckpt.pt", "ckpt.pt", r"its pickle is damaged or not a pickle \(Unsupported operand 0\)")


@damaged("torch pickle whose dict key would take 2^64 steps to hash")
def _(tmp):
    (tmp / "ckpt.pt").write_bytes(dict_key_bomb())
    return Damaged(tmp / "ckpt.pt", "ckpt.pt", "refused: its pickle asks for a SETITEM over more than 1,000,000 values")


@damaged("torch zip whose data.pkl would take 2^64 steps to hash")
def _(tmp):
    with zipfile.ZipFile(tmp / "ckpt.pt", "w") as zf:
        zf.writestr("archive/data.pkl", dict_key_bomb())
        zf.writestr("archive/version", "3\n")
    return Damaged(tmp / "ckpt.pt", "ckpt.pt", "refused: its pickle asks for a SETITEM over")


@damaged("meta.pkl whose stoi maps a character to a list")
def _(tmp):
    case = nano_meta(tmp, pickle.dumps({"stoi": {"a": [1], "b": 0}}))
    case.cause = r"stoi maps a character to \[1\], not to an id"
    return case


@damaged("meta.pkl of 0.5 kB lists sharing sub-lists (10^17 values)")
def _(tmp):
    case = nano_meta(tmp, shared_list_meta())
    case.cause = "refused: it holds a list reached from more than one place"
    return case


@damaged("meta.pkl whose dict key would take 2^64 steps to hash")
def _(tmp):
    case = nano_meta(tmp, dict_key_bomb())
    case.cause = "refused: it asks for a SETITEM over more than 1,000,000 values"
    return case


@damaged("meta.pkl with a lone surrogate as a character")
def _(tmp):
    itos = dict(enumerate("abc\ud800"))
    case = nano_meta(tmp, pickle.dumps({"itos": itos, "stoi": {c: i for i, c in itos.items()}}))
    case.cause = "lone surrogate"
    return case


@damaged("meta.pkl cut short")
def _(tmp):
    case = nano_meta(tmp, META.read_bytes()[:40])
    case.cause = "not a readable pickle"
    return case


@damaged("tokenizer.json as the vocabulary, its unknown-word token not in its vocabulary")
def _(tmp):
    shutil.copy(NANO, tmp / "ckpt.pt")
    (tmp / "tokenizer.json").write_text(word_level_tokenizer_json("<missing>"))
    return Damaged(tmp / "ckpt.pt", "tokenizer.json", "unknown-word token '<missing>' is not in its vocabulary",
                   {"vocab_path": tmp / "tokenizer.json"})


@damaged("tokenizer.json as the vocabulary with ids beyond its size")
def _(tmp):
    shutil.copy(NANO, tmp / "ckpt.pt")
    data = json.loads(word_level_tokenizer_json("<unk>"))
    data["model"]["vocab"]["w64"] = 999
    (tmp / "tokenizer.json").write_text(json.dumps(data))
    return Damaged(tmp / "ckpt.pt", "tokenizer.json", "token ids run up to 999 but its vocabulary has 65 entries",
                   {"vocab_path": tmp / "tokenizer.json"})


@damaged("vocabulary JSON nested 100,000 levels")
def _(tmp):
    shutil.copy(RASCHKA, tmp / "model.pth")
    (tmp / "vocab.json").write_text('{"itos": ' + "[" * 100_000 + "]" * 100_000 + "}")
    return Damaged(tmp / "model.pth", "vocab.json", "JSON nested deeper than 64 levels",
                   {"vocab_path": tmp / "vocab.json", "n_heads": 2})


# ---------------------------------------------------------------- LLMs-from-scratch


@damaged("LLMs-from-scratch tok_emb 3-D")
def _(tmp):
    path = raschka_file(tmp, lambda s: s.update({"tok_emb.weight": torch.zeros(2, 2, 2)}))
    return Damaged(path, "model.pth", r"tok_emb.weight has shape \(2, 2, 2\), expected a matrix", {"n_heads": 2})


@damaged("LLMs-from-scratch sidecar n_heads '²'")
def _(tmp):
    path = raschka_file(tmp, lambda s: None)
    (tmp / "model.json").write_text(json.dumps({**json.loads(RASCHKA_SIDECAR.read_text()), "n_heads": "²"}))
    return Damaged(path, "model.pth", r"n_heads '²' \(model.json\) does not divide")


# ---------------------------------------------------------------- llama2.c


@damaged("llama2.c ckpt.pt with a context of 10^12 positions")
def _(tmp):
    obj = torch.load(LLAMA2C / "ckpt.pt", weights_only=True)
    obj["model_args"]["max_seq_len"] = 10**12
    torch.save(obj, tmp / "ckpt.pt")
    return Damaged(tmp / "ckpt.pt", "ckpt.pt", "context_length 1,000,000,000,000 is more than this app builds",
                   {"allow_no_tokenizer": True})


@damaged("llama2.c tokenizer.bin cut short")
def _(tmp):
    shutil.copy(LLAMA2C / "model.bin", tmp / "model.bin")
    (tmp / "tok.bin").write_bytes((LLAMA2C / "tokenizer.bin").read_bytes()[:-3])
    return Damaged(tmp / "model.bin", "tok.bin", "not a vocabulary this app reads", {"vocab_path": tmp / "tok.bin"})


@damaged("llama2.c model.bin cut short")
def _(tmp):
    (tmp / "model.bin").write_bytes((LLAMA2C / "model.bin").read_bytes()[:-4])
    return Damaged(tmp / "model.bin", "model.bin", "cut short")


# ---------------------------------------------------------------- paths


@damaged("a symbolic link loop")
def _(tmp):
    os.symlink(tmp / "loop-b", tmp / "loop-a")
    os.symlink(tmp / "loop-a", tmp / "loop-b")
    return Damaged(tmp / "loop-a", "loop-a", "a symbolic link that leads nowhere")


@damaged("a folder holding only a symbolic link loop")
def _(tmp):
    (tmp / "folder").mkdir()
    os.symlink(tmp / "folder" / "me", tmp / "folder" / "me")
    return Damaged(tmp / "folder", "folder", "not a checkpoint format this app opens")


@damaged("a damaged file whose name is not UTF-8")
def _(tmp):
    path = Path(os.fsdecode(bytes(tmp) + b"/caf\xe9.pt"))
    path.write_bytes(b"\x80\x02garbage")
    return Damaged(path, "caf\ufffd.pt", "not a torch checkpoint this app can read")


import damaged_gguf  # noqa: E402,F401  (registers the GGUF cases in CORPUS)
import damaged_hf  # noqa: E402,F401  (registers the Hugging Face cases)
