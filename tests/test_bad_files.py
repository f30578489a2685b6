"""Every damaged file ends in one clear message naming it, from ``load_any`` and from the command
line, without hanging; the damage that is not an error (odd facts, prefixes, a name) still opens;
Save As writes every format; a tokenizer never raises on text.

The corpus is ``tests/damaged_files.py``. A file that hung a loader once (a pickle whose walk
never ends) would hang the suite: ``no_hang`` ends the run with a traceback instead.
"""

from __future__ import annotations

import faulthandler
import json
import os
import pickle
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from damaged_gguf import gguf_copy
from damaged_files import (
    CORPUS, LLAMA2C, META, NANO, RASCHKA, RASCHKA_SIDECAR, dict_key_bomb, hf_folder, nanogpt_file,
    native_file, raschka_file, shared_list_meta,
)
from model.checkpoint import CheckpointError, ReaderFailure, load_any, load_checkpoint, save_as
from model.formats.pickled.bounds import PickleTooComplex, check_pickle_bytes
from model.core.plain import check_plain, load_json, short_repr
from model.trace import main as trace_main
from model.tokens.tokenizer import train_word_tokenizer


@pytest.fixture
def no_hang():
    """Ends the whole run with every thread's traceback if a test takes minutes (a loader that
    walks forever inside C code cannot be interrupted any other way)."""
    faulthandler.dump_traceback_later(180, exit=True)
    yield
    faulthandler.cancel_dump_traceback_later()


def _cli_args(case) -> list[str]:
    args = [os.fsdecode(case.path)]
    opts = case.options
    args += ["--ids", "0"] if opts.get("allow_no_tokenizer") else ["once"]
    if "n_heads" in opts:
        args += ["--n-heads", str(opts["n_heads"])]
    if "vocab_path" in opts:
        args += ["--vocab", str(opts["vocab_path"])]
    return args


@pytest.mark.parametrize("kind", list(CORPUS))
def test_every_damaged_file_ends_in_one_clear_message(kind, tmp_path, no_hang, capsys):
    case = CORPUS[kind](tmp_path)
    with pytest.raises(CheckpointError) as info:
        load_any(case.path, **case.options)
    message = str(info.value)
    # An own check caught it: not the dispatcher's catch-all for what no check foresaw.
    assert not isinstance(info.value, ReaderFailure), (message, info.value.__cause__)
    assert message.startswith(case.name + ":"), message
    assert re.search(case.cause, message), message
    assert "\n" not in message and len(message) <= 2000, message
    assert "Please file an issue" not in message and "\ud800" not in message and "\udce9" not in message
    assert trace_main(_cli_args(case)) == 2
    assert capsys.readouterr().err == f"error: {message}\n"


def _cut_copy(tmp_path, what):
    """(file to cut, what to open, options) for one file of each format, copied under tmp_path."""
    if what == "our .safetensors":
        path = native_file(tmp_path)
        return path, path, {}
    if what == "GGUF file":
        path = gguf_copy(tmp_path).path
        return path, path, {}
    if what.startswith("Hugging Face "):
        folder = hf_folder(tmp_path, "hf-llama")
        return folder / what.split()[-1], folder, {}
    sources = {"nanoGPT ckpt.pt": (NANO, None), "LLMs-from-scratch model.pth": (RASCHKA, None),
               "llama2.c model.bin": (LLAMA2C / "model.bin", None), "llama2.c ckpt.pt": (LLAMA2C / "ckpt.pt", None),
               "nanoGPT meta.pkl": (META, NANO), "llama2.c tokenizer.bin": (LLAMA2C / "tokenizer.bin", LLAMA2C / "model.bin"),
               "word vocabulary JSON": (RASCHKA.parent / "raschka_word_vocab.json", RASCHKA)}
    src, model = sources[what]
    shutil.copy(src, tmp_path / src.name)
    if model is None:
        return tmp_path / src.name, tmp_path / src.name, {"n_heads": 2, "allow_no_tokenizer": True}
    shutil.copy(model, tmp_path / ("model" + model.suffix))
    return tmp_path / src.name, tmp_path / ("model" + model.suffix), {"n_heads": 2, "vocab_path": tmp_path / src.name}


@pytest.mark.parametrize("what", ["our .safetensors", "nanoGPT ckpt.pt", "LLMs-from-scratch model.pth",
                                  "llama2.c model.bin", "llama2.c ckpt.pt", "nanoGPT meta.pkl", "llama2.c tokenizer.bin",
                                  "word vocabulary JSON", "Hugging Face config.json", "Hugging Face model.safetensors",
                                  "Hugging Face tokenizer.json", "GGUF file"])
def test_a_file_of_any_format_cut_anywhere_is_one_clear_message(what, tmp_path, no_hang):
    target, opened, options = _cut_copy(tmp_path, what)
    data = target.read_bytes()
    for cut in sorted({1, 2, 8, 9, 64, len(data) // 3, len(data) // 2, len(data.rstrip()) - 1}):  # a final newline is no damage
        target.write_bytes(data[:cut])
        with pytest.raises(CheckpointError) as info:
            load_any(opened, **options)
        assert not isinstance(info.value, ReaderFailure), (cut, str(info.value), info.value.__cause__)
        assert "\n" not in str(info.value), str(info.value)


def test_the_catch_all_names_the_file_and_keeps_the_cause(tmp_path, monkeypatch):
    """What no check foresaw still ends in one CheckpointError naming the file, the original kept."""
    from model.formats.pickled import nanogpt

    def broken(source, options):
        raise KeyError("a reader's own mistake")

    monkeypatch.setattr(nanogpt, "inspect", broken)
    with pytest.raises(ReaderFailure, match=r"^ckpt_nanogpt.pt: cannot be read \(KeyError: \"a reader's own mistake\"\)$") as info:
        load_any(NANO)
    assert isinstance(info.value.__cause__, KeyError)


# ---------------------------------------------------------------- odd, but not errors


def test_training_facts_nested_too_deep_or_too_large_load_as_none(tmp_path):
    for i, facts in enumerate(("[" * 100_000 + "]" * 100_000, json.dumps({"val_curve": [[1, 2.0]] * 60_000}))):
        path = native_file(tmp_path, f"facts{i}.safetensors", metadata=lambda m, f=facts: {**m, "training": f})
        assert load_checkpoint(path).training == {}


def test_a_nanogpt_checkpoint_named_safetensors_is_read_by_its_contents(tmp_path):
    shutil.copy(NANO, tmp_path / "ckpt.safetensors")
    ckpt = load_any(tmp_path / "ckpt.safetensors", vocab_path=META)
    reference = load_any(NANO, vocab_path=META)
    assert ckpt.source_format == "nanogpt"
    np.testing.assert_array_equal(ckpt.model.trace([1, 2, 3]).logits, reference.model.trace([1, 2, 3]).logits)


def test_odd_settings_in_a_torch_file_are_left_out_not_trusted(tmp_path, no_hang):
    """model_args and train.py's config hold whatever the file says: a list of 10^17 shared values,
    an infinite step count, a number beyond 64 bits, a name too long for any file system. Only plain
    values are kept, so nothing walks, converts or opens what they describe."""
    huge = pickle.loads(shared_list_meta())["itos"]

    def change(obj):
        obj["iter_num"] = float("inf")
        obj["best_val_loss"] = huge
        obj["config"].update({"dataset": "d" * 5000, "block_size": 2**70})
        obj["model_args"]["dropout"] = torch.zeros(3)

    path = nanogpt_file(tmp_path, change)
    ckpt = load_any(path, allow_no_tokenizer=True)
    assert "steps" not in ckpt.training and "val_loss" not in ckpt.training
    assert ckpt.tokenizer is None and len(ckpt.training["dataset"]) <= 500
    nul = nanogpt_file(tmp_path, lambda o: o["config"].update({"dataset": "a\x00b"}), "nul.pt")
    assert load_any(nul, allow_no_tokenizer=True).tokenizer is None
    fp8 = nanogpt_file(tmp_path, lambda o: o["model"].update({"lm_head.weight": o["model"]["transformer.wte.weight"]
                                                               .to(torch.float8_e4m3fn)}), "fp8.pt")
    assert not load_any(fp8, allow_no_tokenizer=True).config.tied_unembed  # float8 compared with float32: untied


def test_the_books_model_from_torch_compile_opens(tmp_path):
    """torch.compile saves every key as _orig_mod.<name>: read as the plain names, as for nanoGPT."""
    path = raschka_file(tmp_path, lambda s: [s.__setitem__("_orig_mod." + k, s.pop(k)) for k in list(s)])
    shutil.copy(RASCHKA_SIDECAR, tmp_path / "model_config.json")
    ckpt = load_any(path, allow_no_tokenizer=True)
    reference = load_any(RASCHKA)
    assert ckpt.source_format == "llms-from-scratch" and ckpt.config == reference.config
    ids = np.load(RASCHKA.parent / "raschka_input_ids.npy")
    np.testing.assert_array_equal(ckpt.model.trace(ids).logits, reference.model.trace(ids).logits)


def test_files_and_folders_whose_names_are_not_utf8_open_and_save(tmp_path):
    """Libraries that take only UTF-8 paths (safetensors, tokenizers) are handed the contents."""
    folder = Path(os.fsdecode(bytes(tmp_path) + b"/d\xe9"))
    folder.mkdir()
    nano = folder / os.fsdecode(b"ckpt\xff.pt")
    shutil.copy(NANO, nano)
    ckpt = load_any(nano, vocab_path=META)
    out = folder / os.fsdecode(b"s\xe9.safetensors")
    save_as(ckpt, out)
    again = load_any(out)
    assert again.name == "s\ufffd" and again.training["imported_from"]["file"] == "ckpt\ufffd.pt"
    np.testing.assert_array_equal(again.model.trace([1, 2]).logits, ckpt.model.trace([1, 2]).logits)
    hf = shutil.copytree(hf_folder(tmp_path), folder / "hf")
    assert load_any(hf).tokenizer.encode("once upon").ids == (261, 344, 2402)
    (hf / "tokenizer.json").unlink()  # GPT-2's vocab.json + merges.txt
    assert load_any(hf).tokenizer.encode("once upon").ids == (261, 344, 2402)


# ---------------------------------------------------------------- Save As, every format


def _tied_raschka(tmp_path):
    """The book's model with out_head.weight the same storage as tok_emb.weight (weight tying)."""
    def tie(state):
        state["out_head.weight"] = state["tok_emb.weight"]

    path = raschka_file(tmp_path, tie)
    shutil.copy(RASCHKA_SIDECAR, tmp_path / "model_config.json")
    return load_any(path, allow_no_tokenizer=True)


@pytest.mark.parametrize("fmt", ["llms-from-scratch, tied storage", "nanogpt", "llama2.c model.bin", "hf-gpt2"])
def test_save_as_writes_every_format_with_shared_tensors(fmt, tmp_path):
    ckpt = {
        "llms-from-scratch, tied storage": lambda: _tied_raschka(tmp_path),
        "nanogpt": lambda: load_any(NANO, vocab_path=META),
        "llama2.c model.bin": lambda: load_any(LLAMA2C / "model.bin"),
        "hf-gpt2": lambda: load_any(hf_folder(tmp_path)),
    }[fmt]()
    out = tmp_path / "saved.safetensors"
    save_as(ckpt, out)
    again = load_checkpoint(out)
    np.testing.assert_array_equal(again.model.trace([1, 2, 3]).logits, ckpt.model.trace([1, 2, 3]).logits)


# ---------------------------------------------------------------- the parts


def test_tokenizer_encode_never_raises_even_when_the_library_does(tiny_tokenizer):
    """A checked tokenizer does not fail; should the library still fail on some word, that word
    gives no token and the others keep their ids and spans."""
    tok = train_word_tokenizer(["the cat sat on the mat ."], 64)
    real = tok.hf

    class Failing:
        def __getattr__(self, name):
            return getattr(real, name)

        def encode(self, text, add_special_tokens=True):
            if "boom" in text:
                raise Exception("the library failed")
            return real.encode(text, add_special_tokens=add_special_tokens)

    tok.hf = Failing()
    enc = tok.encode("the boom cat")
    assert enc.tokens == ("the", "cat") and enc.spans == ((0, 3), (9, 12))


def test_plain_data_bounds():
    shared = [0]
    for _ in range(40):
        shared = [shared, shared]  # 2^40 values by reference, 81 lists in memory
    assert check_plain(shared, max_depth=100, max_nodes=1000) == "more than 1,000 values"
    assert check_plain([[[]]], max_depth=1) == "nesting deeper than 1 levels"
    assert check_plain({"a": 1.5}, (dict, str, int)) == "a value of type float"
    with pytest.raises(ValueError, match="nested deeper than 64"):
        load_json("[" * 100_000 + "]" * 100_000)
    assert len(short_repr(shared)) <= 80 and short_repr(10**5000) == "<an integer of 16,610 bits>"


def test_pickle_work_is_bounded_before_loading(no_hang):
    with pytest.raises(PickleTooComplex, match="SETITEM over more than 1,000,000 values"):
        check_pickle_bytes(dict_key_bomb())
    for path in (NANO, RASCHKA, LLAMA2C / "ckpt.pt"):  # real checkpoints pass
        import zipfile

        with zipfile.ZipFile(path) as zf:
            check_pickle_bytes(zf.read(next(n for n in zf.namelist() if n.endswith("data.pkl"))), strict=True)
    check_pickle_bytes(META.read_bytes(), strict=True)  # strict: read to the end, every opcode understood
    check_pickle_bytes(shared_list_meta())  # shared lists are never hashed: the value check refuses them


def test_training_facts_of_any_shape_are_shown_without_raising():
    """The Model panel's text of facts read from a file: odd types and ranges become a short repr,
    never an exception; every row is bounded."""
    from explorer.core.model_facts import VALUE_MAX_CHARS, describe_training

    facts = {"steps": 10, "val_curve": [["a", 1.0], [float("inf"), 2.0], [5, float("nan")], [7, 3.25]],
             "val_loss": 2**2000, "train_s": "soon", "command": "x" * 5000,
             "epochs": [1, 2], "data": {"path": ["a"] * 3000}, "resumed_training": {"steps": "many"}}
    sections = describe_training(facts)
    rows = dict(row for _title, rows in sections for row in rows)
    assert rows["val loss curve"] == "7: 3.250  (nats/token)"
    assert all(len(text) <= VALUE_MAX_CHARS for text in rows.values())
