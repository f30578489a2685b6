"""The app on nanoGPT and LLMs-from-scratch files: the questions File ▸ Open asks, the answers it
remembers, exact agreement with the reference code, models without a vocabulary, GPT-2's token
names, another context length, and Save As."""

from __future__ import annotations

import json
import pickle
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from explorer.core.token_text import append_id, display_tokens, ids_encoding
from explorer.qt.files.opening import recall
from explorer_helpers import Questions, make_window
from model import Tokenizer
from model.checkpoint import load_checkpoint

FIX = Path(__file__).parent / "fixtures" / "interop"
NANO, RASCHKA = FIX / "ckpt_nanogpt.pt", FIX / "ckpt_raschka.pth"
META, WORDS = FIX / "nanogpt_shakespeare_char_meta.pkl", FIX / "raschka_word_vocab.json"
GPT2_DIR = Path(__file__).resolve().parents[1] / "assets" / "gpt2-bpe"  # shipped with the project


@pytest.fixture
def questions(monkeypatch):
    return Questions().install(monkeypatch)


@pytest.fixture
def window(qtbot, tmp_path, tiny_checkpoint, questions):
    return make_window(qtbot, tmp_path, tiny_checkpoint)


def _copy(tmp_path: Path, *pairs: tuple[Path, str]) -> list[Path]:
    out = []
    for src, name in pairs:
        out.append(tmp_path / name)
        shutil.copyfile(src, out[-1])
    return out


def _fixture_text(stem: str) -> str:
    return json.loads((FIX / f"{stem}_input.json").read_text())["text"]


def _assert_reference(session, stem: str, ckpt_stem: str) -> None:
    """The shown trace is the reference code's: logits within 1e-5, attention weights within 1e-6."""
    ids = np.load(FIX / f"{stem}_input_ids.npy")
    np.testing.assert_array_equal(session.trace.token_ids, ids)
    ref_logits = np.load(FIX / f"{ckpt_stem}_ref_logits.npy")
    ref_attn = np.load(FIX / f"{ckpt_stem}_ref_attn.npy")
    assert np.abs(session.trace.logits - ref_logits).max() <= 1e-5
    attn = np.stack([b.attn_weights for b in session.trace.blocks])
    assert attn.shape == ref_attn.shape and np.abs(attn - ref_attn).max() <= 1e-6


# ---------------------------------------------------------------- nanoGPT


@pytest.mark.slow
def test_nanogpt_with_meta_beside_opens_without_questions_and_matches_reference(window, tmp_path, questions):
    ckpt, _ = _copy(tmp_path, (NANO, "ckpt.pt"), (META, "meta.pkl"))
    assert window.files.open_checkpoint(ckpt)
    assert questions.asked == [] and questions.errors == []
    s = window.session
    assert s.checkpoint.source_format == "nanogpt" and s.config.context_length == 32
    window.panels["tokens"].editor.setPlainText(_fixture_text("nanogpt"))
    _assert_reference(s, "nanogpt", "ckpt_nanogpt")
    assert s.tokens[:5] == ["F", "i", "r", "s", "t"] and s.tokens[14] == "\n"
    assert window.panels["attention"].weights.row_labels[14] == "14 ↵"
    assert "nanogpt" in window.panels["model"].browser.toPlainText()


@pytest.mark.slow
def test_nanogpt_without_meta_asks_for_the_vocabulary_once(window, tmp_path, questions):
    (ckpt,) = _copy(tmp_path, (NANO, "ckpt.pt"))
    questions.choices.append(0)  # "Choose a vocabulary file…"
    questions.files.append(str(META))
    assert window.files.open_checkpoint(ckpt)
    assert [q.split(":")[0] for q in questions.asked] == ["ask_choice", "open_file"]
    assert "no vocabulary was found" in questions.asked[0] and "meta.pkl" in questions.asked[0]
    assert questions.proposed == [str(tmp_path.resolve())]  # the picker starts beside the checkpoint
    assert window.session.tokenizer.vocab_size == 65
    window.session.set_text(_fixture_text("nanogpt"))
    _assert_reference(window.session, "nanogpt", "ckpt_nanogpt")
    assert recall(window.settings, ckpt).vocab_path == META.resolve()
    first = window.session.checkpoint
    window.files.reload()  # F5, Open Recent and drag and drop all come here: no question again
    assert window.files.open_recent(str(ckpt.resolve()))
    assert window.session.checkpoint is not first and window.session.tokenizer.vocab_size == 65
    assert len(questions.asked) == 2 and questions.errors == []


def test_a_wrong_vocabulary_is_explained_and_asked_again(window, tmp_path, questions):
    (ckpt,) = _copy(tmp_path, (NANO, "ckpt.pt"))
    questions.choices += [0, 0]
    questions.files += [str(WORDS), str(META)]  # first the 500-word vocabulary: wrong size
    assert window.files.open_checkpoint(ckpt)
    assert len(questions.errors) == 1
    assert "500" in questions.errors[0][1] and "65" in questions.errors[0][1]
    assert questions.asked[2].startswith("ask_choice") and window.session.tokenizer.vocab_size == 65


def test_cancelling_any_question_keeps_the_old_model(window, tmp_path, questions):
    (nano,) = _copy(tmp_path, (NANO, "ckpt.pt"))
    (raschka,) = _copy(tmp_path, (RASCHKA, "model.pth"))
    window.session.set_text("the cat")
    before, trace_before = window.session.checkpoint, window.session.trace
    questions.choices += [None, 0]  # cancel the vocabulary question; then cancel the file picker
    assert not window.files.open_checkpoint(nano)
    assert not window.files.open_checkpoint(nano)
    assert not window.files.open_checkpoint(raschka)  # ask_int answers None: cancelled
    assert [q.split(":")[0] for q in questions.asked] == ["ask_choice", "ask_choice", "open_file", "ask_int"]
    assert questions.errors == [] and window.session.checkpoint is before
    assert window.session.trace is trace_before and window.files.recent_files() == []
    assert "cancelled" in window.statusBar().currentMessage()
    assert recall(window.settings, nano).vocab_path is None


@pytest.mark.slow
def test_nanogpt_without_a_vocabulary_takes_typed_ids(window, tmp_path, questions):
    (ckpt,) = _copy(tmp_path, (NANO, "ckpt.pt"))
    questions.choices.append(2)  # "Open without a vocabulary"
    assert window.files.open_checkpoint(ckpt)
    s, panel = window.session, window.panels["tokens"]
    assert s.tokenizer is None and not panel.hint.isHidden()
    assert "type token ids 0–64" in panel.hint.text()
    ids = np.load(FIX / "nanogpt_input_ids.npy")
    panel.editor.setPlainText(", ".join(map(str, ids[:16])) + "\n" + " ".join(map(str, ids[16:])))
    _assert_reference(s, "nanogpt", "ckpt_nanogpt")
    assert s.tokens[:2] == ["#18", "#47"] and panel.chips[0].text().startswith("<b>#18</b>")
    panel.editor.setPlainText("3, x 70; 5")
    assert s.trace.token_ids.tolist() == [3, 5] and "'x', '70'" in panel.hint.text()
    panel.editor.setPlainText("7" * 5000 + " 3")  # one unbroken item in the hint made the panel 38,000 px wide
    assert s.trace.token_ids.tolist() == [3] and "'77777777777777777777777…'" in panel.hint.text()
    assert panel.hint.minimumSizeHint().width() < 1000
    panel.editor.setPlainText("3, x 70; 5")
    next_token = window.panels["next-token"]
    next_token.refresh()
    top = int(next_token.top.ids[0])
    next_token.append(0)  # a click on the top bar appends its id
    assert s.text == f"3, x 70; 5, {top}" and s.trace.token_ids.tolist() == [3, 5, top]
    window.files.reload()
    assert len(questions.asked) == 1 and window.session.tokenizer is None  # remembered: no question


# ---------------------------------------------------------------- LLMs from scratch


@pytest.mark.slow
def test_raschka_with_its_sidecar_opens_and_matches_reference(window, tmp_path, questions):
    ckpt, _, _ = _copy(tmp_path, (RASCHKA, "model.pth"), (FIX / "ckpt_raschka_config.json", "model.json"),
                       (WORDS, "vocab.json"))
    assert window.files.open_checkpoint(ckpt)
    assert questions.asked == [] and window.session.config.n_heads == 2
    window.session.set_text(_fixture_text("raschka"))
    _assert_reference(window.session, "raschka", "ckpt_raschka")
    assert window.panels["attention"].head_box.maximum() == 1


@pytest.mark.slow
def test_raschka_without_sidecar_asks_n_heads_once_and_remembers(qtbot, window, tmp_path, questions):
    ckpt, _ = _copy(tmp_path, (RASCHKA, "model.pth"), (WORDS, "vocab.json"))
    questions.ints += [3, 2]  # 3 does not divide d_model 64: explained, then asked again
    assert window.files.open_checkpoint(ckpt)
    assert [q.split(":")[0] for q in questions.asked] == ["ask_int", "ask_int"]
    assert "1, 2, 4, 8, 16, 32, 64" in questions.asked[0]
    assert len(questions.errors) == 1 and "3 heads do not divide" in questions.errors[0][1]
    window.session.set_text(_fixture_text("raschka"))
    _assert_reference(window.session, "raschka", "ckpt_raschka")
    window.save_settings()
    # A new window on the same settings (the app started again) opens it without asking.
    again = make_window(qtbot, tmp_path, window.session.checkpoint)
    assert again.files.open_recent(str(ckpt.resolve())) and again.session.config.n_heads == 2
    assert len(questions.asked) == 2


# ---------------------------------------------------------------- Save As, other contexts, GPT-2


def test_save_as_round_trip_opens_the_saved_file_directly(window, tmp_path, questions):
    (ckpt,) = _copy(tmp_path, (NANO, "ckpt.pt"))
    questions.choices.append(0)
    questions.files.append(str(META))
    assert window.files.open_checkpoint(ckpt)
    window.session.set_text(_fixture_text("nanogpt"))
    logits = window.session.trace.logits.copy()
    questions.files.append(str(tmp_path / "saved"))  # no suffix typed: .safetensors is added
    window.files.on_save_as()
    assert questions.proposed[-1] == str(tmp_path.resolve() / "ckpt.safetensors")
    saved = tmp_path / "saved.safetensors"
    s = window.session
    assert s.checkpoint.path == saved and s.checkpoint.source_format == "transformer-explorer"
    assert s.checkpoint.training["imported_from"] == {"format": "nanogpt", "file": "ckpt.pt"}
    np.testing.assert_array_equal(s.trace.logits, logits)
    assert len(questions.asked) == 3 and questions.errors == []  # no question for the saved file
    assert load_checkpoint(saved).tokenizer.vocab_size == 65


def test_save_as_into_an_unwritable_place_says_so_and_writes_nothing(window, tmp_path, questions, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    before = window.session.checkpoint
    assert not window.files.save_checkpoint_as(blocker / "m.safetensors")
    assert len(questions.errors) == 1 and "cannot write" in questions.errors[0][1]
    # A disk that fills up half way: the old file stays as it was, no partial file is left.
    target = tmp_path / "m.safetensors"
    target.write_bytes(b"the previous version")

    def full_disk(_tensors, filename, metadata=None):
        Path(filename).write_bytes(b"half a checkpoint")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("safetensors.torch.save_file", full_disk)
    assert not window.files.save_checkpoint_as(target)
    assert "No space left on device" in questions.errors[-1][1]
    assert target.read_bytes() == b"the previous version" and window.session.checkpoint is before
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "settings.ini") == ["a-file", "m.safetensors"]


def _nanogpt_file(path: Path, vocab: int, ctx: int, d: int = 8) -> None:
    """A random nanoGPT ckpt.pt (1 layer, 2 heads, no biases) in nanoGPT's own key names."""
    gen = torch.Generator().manual_seed(0)
    r = lambda *s: torch.randn(*s, generator=gen) * 0.3  # noqa: E731
    p = "transformer.h.0."
    sd = {"transformer.wte.weight": r(vocab, d), "transformer.wpe.weight": r(ctx, d),
          p + "ln_1.weight": 1 + r(d), p + "attn.c_attn.weight": r(3 * d, d), p + "attn.c_proj.weight": r(d, d),
          p + "ln_2.weight": 1 + r(d), p + "mlp.c_fc.weight": r(4 * d, d), p + "mlp.c_proj.weight": r(d, 4 * d),
          "transformer.ln_f.weight": 1 + r(d)}
    sd["lm_head.weight"] = sd["transformer.wte.weight"]
    args = {"n_layer": 1, "n_head": 2, "n_embd": d, "block_size": ctx, "bias": False, "vocab_size": vocab}
    torch.save({"model": sd, "model_args": args, "iter_num": 5}, path)


def test_a_context_of_16_crops_to_the_last_16_tokens(window, tmp_path, questions):
    chars = sorted(set("abcdefghijklmnopqrstuvwxyz .\n"))
    _nanogpt_file(tmp_path / "ckpt.pt", vocab=len(chars), ctx=16)
    (tmp_path / "meta.pkl").write_bytes(pickle.dumps({"vocab_size": len(chars), "itos": dict(enumerate(chars)),
                                                     "stoi": {c: i for i, c in enumerate(chars)}}))
    assert window.files.open_checkpoint(tmp_path / "ckpt.pt") and questions.asked == []
    text = "the quick brown fox jumps"  # 25 characters
    window.panels["tokens"].editor.setPlainText(text)
    s = window.session
    assert s.config.context_length == 16 and s.trace.n_tokens == 16 and s.trace.dropped == 9
    assert "".join(s.tokens) == text[-16:]
    assert window.panels["tokens"].note.text() == "showing the last 16 of 25 tokens"
    assert len(window.panels["attention"].weights.row_labels) == 16
    assert "16/16 tokens" in window.status.text()


def test_gpt2_token_names_are_shown_as_their_text(window, tmp_path, questions, monkeypatch):
    monkeypatch.delenv("TIKTOKEN_CACHE_DIR", raising=False)  # the project's own copy
    _nanogpt_file(tmp_path / "ckpt.pt", vocab=50304, ctx=8)
    assert window.files.open_checkpoint(tmp_path / "ckpt.pt") and questions.asked == []
    assert window.session.checkpoint.vocab_padding == 47
    window.session.set_text("Hello world’s\n")
    s = window.session
    assert s.encoding.tokens[1] == "Ġworld" and s.tokens[:2] == ["Hello", " world"]
    assert s.tokens[-1] == "\n" and window.panels["attention"].weights.row_labels[1] == "1 ␣world"
    chip = window.panels["tokens"].chips[1].text()
    assert "␣world" in chip and "Ġ" not in chip


def test_token_text_functions():
    gpt2 = Tokenizer.from_json((FIX.parent / "arch" / "hf-gpt2" / "tokenizer.json").read_text(encoding="utf-8"))
    text = "Once upon a time, naïve café 🤗\n"
    names = display_tokens(gpt2, gpt2.encode(text))
    assert "".join(names).replace("⋯", "") == text and "Ġ" not in "".join(names)
    assert display_tokens(gpt2, gpt2.encode(text), 2) == names[2:]
    enc, ignored = ids_encoding("3, 17;5\n x 64 -1 ٣", 64)
    assert enc.ids == (3, 17, 5) and enc.tokens == ("#3", "#17", "#5")
    assert enc.spans == ((0, 1), (3, 5), (6, 7)) and ignored == ["x", "64", "-1", "٣"]
    assert display_tokens(None, enc, 1) == ["#17", "#5"]
    assert append_id("", 4) == "4" and append_id("3, 17 ", 4) == "3, 17, 4" and append_id("3,", 4) == "3, 4"


def test_ids_encoding_survives_a_pasted_run_of_digits():
    """5,000 digits once raised ValueError (int() refuses over 4,300) and left the session's encoding stale."""
    enc, ignored = ids_encoding("5" * 5000 + " 0007 00 64", 64)
    assert enc.ids == (7, 0) and ignored == ["5" * 5000, "64"]
