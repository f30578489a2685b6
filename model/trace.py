"""The headless command ``python -m model.trace CHECKPOINT TEXT`` (CHECKPOINT: a file or a folder).

CHECKPOINT is a file or a Hugging Face model folder (or its ``config.json``), ``hf:REPO_ID`` for a
model on the Hugging Face Hub (:mod:`model.formats.hub`), or ``builtin:NAME`` for a model shipped
with the app (``transformer-explorer --list-models``). Prints the tokens
(their readable text), the last position's attention weights for each layer and head, and the top
next tokens with their probabilities (``--json`` for one JSON object with every tensor).
``--explain`` adds why the model predicts what it does (:mod:`model.explain`); ``--patch CORRUPTED``
activation patching of TEXT (clean) into CORRUPTED (:mod:`model.explain.patching`); ``--head-scores``
every head's previous-token, duplicate-token and induction score (:mod:`model.explain.heads`); ``--generate N``
continues the text by N tokens (:mod:`model.generate`: greedy, or sampled with ``--temperature``,
``--top-k``, ``--top-p`` and ``--seed``).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys

import numpy as np

from model.tokens.names import escaped, token_name, token_names
from model.tracing.records import Trace

EXIT_NONFINITE = 3
EPILOG = """exit status: 0 done; 2 a bad file or input (one line on stderr); 3 the trace holds values
that are not numbers (NaN or inf, e.g. from weights so large that the attention scores overflow):
stderr says where they start (the layer and tensor) and the output is still written, with them as
null in --json and nan in the text."""


def _parse_ids(text: str) -> list[int]:
    try:
        return [int(part) for part in text.replace(" ", "").split(",") if part]
    except ValueError:
        raise ValueError(f"--ids takes comma-separated integers, got {text!r}") from None


def _printable(token: str) -> str:
    """A token name on one line: control characters (a newline) as escapes (``\\n``)."""
    return escaped(token, keep=" ")


def main(argv: list[str] | None = None) -> int:
    """``python -m model.trace``: trace a checkpoint on a text and print what it computed.

    Returns the exit status: 0, 2 for a bad file or input, :data:`EXIT_NONFINITE` (3) when the
    trace holds NaN or infinite values (the output is still written).
    """
    from model.checkpoint import CheckpointError, NeedsInput, load_any

    p = argparse.ArgumentParser(prog="python -m model.trace", description="Trace a checkpoint on a text and print what it computed.",
                                epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("checkpoint", help="a checkpoint file or folder (our .safetensors, a Hugging Face model folder or its "
                   "config.json, a llama2.c file or folder, or another format the app opens), or hf:REPO_ID[@REVISION] "
                   "for a model on the Hugging Face Hub (fetched into its cache; HF_HUB_OFFLINE=1: the cache only), or "
                   "builtin:NAME for a model shipped with the app (transformer-explorer --list-models)")
    p.add_argument("text", nargs="?", default="", help="the input text")
    p.add_argument("--ids", help="comma-separated token ids instead of text, e.g. 3,17,5")
    p.add_argument("--no-pe", action="store_true", help="switch positional encoding off (x_i = e_i)")
    p.add_argument("--bidirectional", action="store_true", help="switch the causal mask off")
    p.add_argument("--top-k", type=int, help="how many next tokens to list (default 5); with --generate and "
                   "--temperature above 0 it also keeps only the k most likely tokens when sampling")
    p.add_argument("--n-heads", type=int, help="heads per block, for files that cannot tell")
    p.add_argument("--vocab", help="the vocabulary, where it is not beside the checkpoint (a meta.pkl, "
                   "a word-vocabulary JSON, a tokenizer.json, a llama2.c tokenizer.bin, or a folder with GPT-2's files)")
    p.add_argument("--json", action="store_true", help="print one JSON object with every tensor")
    p.add_argument("--over-training", action="store_true", help="CHECKPOINT is a snapshot folder (or a checkpoint "
                   "with one): print curves over the training steps (see model/training/trace_over_training.py)")
    p.add_argument("--explain", action="store_true", help="also explain the prediction at --position "
                   "(logit lens, direct logit attribution, leave-one-out, score terms; see model/explain)")
    p.add_argument("--position", type=int, help="with --explain or --over-training: the position (default the last; "
                   "-1 counts from the end)")
    p.add_argument("--target", help="with --explain, --patch or --over-training: the token to follow, as the tokenizer "
                   "writes it or #ID (default: --explain the top-1; --patch the clean top-1; --over-training the next token)")
    p.add_argument("--patch", metavar="CORRUPTED", help="activation patching: TEXT is the clean text, CORRUPTED the "
                   "same number of tokens with a change (with --ids: comma-separated ids); patch each activation of "
                   "the clean run into the corrupted run, one at a time, and print the normalised logit difference")
    p.add_argument("--foil", help="with --patch: the token the target is compared with (default the corrupted "
                   "top-1), as the tokenizer writes it or #ID")
    p.add_argument("--head-scores", action="store_true", help="also score every head as a previous-token, "
                   "duplicate-token and induction head on a probe of 20 seeded random tokens repeated")
    p.add_argument("--head", type=int, default=0, help="with --explain: the layer-0 head whose scores are split (0)")
    p.add_argument("--max-sources", type=int, metavar="N", help="with --explain: leave-one-out for at most N earlier "
                   "tokens (the first, and those with the most attention or direct effect; the others null); "
                   "default all (one forward each: slow for long texts and big models)")
    p.add_argument("--generate", type=int, metavar="N", help="continue the text by N tokens: greedy (the most "
                   "likely each time), or sampled with --temperature above 0; the output adds them ('generated')")
    p.add_argument("--temperature", type=float, default=0.0, help="with --generate: 0 greedy (default), else "
                   "sample from softmax(logits / T)")
    p.add_argument("--top-p", type=float, help="with --generate and a temperature: sample only from the smallest "
                   "set of most likely tokens whose probability reaches P (nucleus sampling)")
    p.add_argument("--seed", type=int, help="with --generate and a temperature: the seed of the draws (default 0); "
                   "the same seed gives the same text")
    args = p.parse_intermixed_args(argv)  # the text may come after the options too
    if args.over_training:
        from model.training.trace_over_training import run

        return run(args, _parse_ids)
    try:
        if args.ids is not None and args.text:
            raise ValueError("give the text or --ids, not both")
        sampling = _sampling(args)
        if args.top_k is None:
            args.top_k = 5
        if args.top_k < 0:  # it listed "top 0 next tokens" without a word
            raise ValueError(f"--top-k must be 0 or more, got {args.top_k}")
        ckpt = load_any(args.checkpoint, n_heads=args.n_heads, vocab_path=args.vocab,
                        allow_no_tokenizer=args.ids is not None)
        tokenizer = ckpt.tokenizer
        if args.ids is not None:
            ids = _parse_ids(args.ids)
        else:
            if tokenizer is None:
                raise ValueError(f"{args.checkpoint}: no tokenizer was found for this model; use --ids")
            ids = tokenizer.encode(args.text).ids
        tr = ckpt.model.trace(ids, positional_encoding=not args.no_pe, causal=not args.bidirectional)
        ex = _explain(args, ckpt, tr)
        circuits = _circuits(args, ckpt, ids)
        gen = _generate(args, ckpt, ids, sampling, args.text if args.ids is None else None)
    except NeedsInput as exc:
        hint = "run again with --n-heads N" if exc.kind == "n_heads" else (
            "give --vocab PATH, or use --ids" if exc.suggested is None else
            f"give --vocab PATH (GPT-2's files: --vocab {exc.suggested}), or use --ids")
        print(f"error: {exc}\n({hint})", file=sys.stderr)
        return 2
    except (CheckpointError, ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    # Readable names (Tokenizer.display): " world" for GPT-2's "Ġworld"; "#id" without a vocabulary.
    run = [int(i) for i in tr.token_ids]
    tokens = token_names(tokenizer, run)
    name = functools.partial(token_name, tokenizer)
    bad = tr.nonfinite
    if bad is not None:  # said first: a reader piping the output still sees it
        print(f"error: {bad}; they are written as null (--json) or nan", file=sys.stderr)
    code = EXIT_NONFINITE if bad is not None else 0
    try:
        if args.json:
            _print_json(tr, tokens, _top_k(tr, args.top_k, name), ex, name, gen, circuits)
        else:
            _print_text(tr, tokens, _top_k(tr, args.top_k, name), ex, name, gen, circuits)
        sys.stdout.flush()
    except BrokenPipeError:  # the reader stopped early (`| head`): not an error of ours
        # Point stdout at /dev/null so that the interpreter's own flush at exit cannot fail again.
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (OSError, ValueError):  # a stdout without a file descriptor (a test's capture)
            pass
    return code


def _top_k(tr: Trace, k: int, name) -> list:
    """[[token, probability or None], ...] for the last position, most likely first."""
    if not tr.n_tokens:
        return []
    last = tr.probs[-1]
    order = np.argsort(-last, kind="stable")[:max(0, min(k, last.shape[0]))]
    return [[name(int(i)), float(last[i]) if np.isfinite(last[i]) else None] for i in order]


def _finite_or_none(a: np.ndarray) -> list:
    return a.tolist() if np.isfinite(a).all() else np.where(np.isfinite(a), a, None).tolist()


def _print_json(tr: Trace, tokens, top, ex, name, gen=None, circuits=(None, None)) -> None:
    out = {
        "tokens": tokens,
        "token_ids": [int(i) for i in tr.token_ids],
        "dropped": tr.dropped,
        "top_k": top,
        "tensors": {key: _finite_or_none(a) for key, a in tr.named()},  # masked scores, NaN: null
    }
    if ex is not None:
        from model.explain.report import explanation_json

        out["explain"] = explanation_json(*ex, name)
    if gen is not None:
        out["generated"] = gen
    patching, heads = circuits
    if patching is not None or heads is not None:
        from model.explain.circuit_report import head_scores_json, patching_json

        if patching is not None:
            out["patching"] = patching_json(patching, name)
        if heads is not None:
            out["head_scores"] = head_scores_json(heads, name)
    json.dump(out, sys.stdout, allow_nan=False)  # standard JSON: no NaN or Infinity literals
    print()


def _print_text(tr: Trace, tokens, top, ex, name, gen=None, circuits=(None, None)) -> None:
    print(f"tokens ({tr.n_tokens}" + (f", {tr.dropped} dropped" if tr.dropped else "") + "):")
    print("  " + " ".join(f"[{i}]{_printable(t)}" for i, t in enumerate(tokens)))
    for li, layer in enumerate(tr.blocks):
        for h in range(layer.attn_weights.shape[0]):
            row = layer.attn_weights[h, -1] if tr.n_tokens else []
            cells = " ".join(f"{_printable(t)}:{w:.3f}" for t, w in zip(tokens, row))
            print(f"layer {li} head {h}, last position attends to: {cells}")
    if not tr.blocks and tr.n_tokens and getattr(tr, "slot_in", None) is not None:  # the model before attention
        n = tr.slot_in.shape[1]
        sizes = np.linalg.norm(tr.slot_in[-1].astype(np.float64), axis=-1)  # (n,): what each slot adds
        cells = " ".join(f"{_printable(tokens[tr.n_tokens - n + s])}:{sizes[s]:.3f}"
                         for s in range(max(0, n - tr.n_tokens), n))
        print(f"no attention; the last position's window, |e W_in[slot]| per token: {cells}")
    print(f"top {len(top)} next tokens:")
    for tok, prob in top:
        print(f"  {tok!r:>16}  " + (f"{prob:.4f}" if prob is not None else "nan"))
    if ex is not None:
        from model.explain.report import format_explanation

        print(format_explanation(*ex, tokens, name))
    if gen is not None:
        print(f"generated ({len(gen['ids'])} tokens, {gen['how']}):")
        print("  " + " ".join(f"[{t}]{_printable(tok)}" for t, tok in zip(gen["ids"], gen["tokens"])))
        if gen["text"] is not None:
            print(f"  text: {_printable(gen['text'])}")
    patching, heads = circuits
    if patching is not None or heads is not None:
        from model.explain.circuit_report import format_head_scores, format_patching

        if patching is not None:
            print(format_patching(patching, lambda t: _printable(name(t))))
        if heads is not None:
            print(format_head_scores(heads))


def _explain(args, ckpt, tr):
    """(Explanation, what-ifs) that ``--explain`` asks for, or None; ValueError on a bad option."""
    if not args.explain:
        if args.position is not None or (args.target is not None and args.patch is None) or args.head \
                or args.max_sources is not None:
            raise ValueError("--position, --target, --head and --max-sources go with --explain (--target also with --patch)")
        return None
    from model.explain import explain, standard_what_ifs
    from model.explain.report import resolve_target

    target = None if args.target is None else resolve_target(args.target, ckpt.tokenizer, ckpt.model.config.vocab_size)
    if args.max_sources is not None and args.max_sources < 1:
        raise ValueError(f"--max-sources must be at least 1, got {args.max_sources}")
    ex = explain(ckpt.model, tr, args.position, target, head=args.head, top_k=args.top_k,
                 max_leave_one_out=args.max_sources)
    return ex, standard_what_ifs(ckpt.model, tr, ex.position, ex.target_id, top_k=args.top_k)


def _circuits(args, ckpt, ids: list[int]) -> tuple:
    """(PatchingResult or None, HeadScores or None) that ``--patch`` and ``--head-scores`` ask for."""
    if args.foil is not None and args.patch is None:
        raise ValueError("--foil goes with --patch")
    patching = heads = None
    if args.patch is not None:
        from model.explain.patching import activation_patching
        from model.explain.report import resolve_target

        tok, V = ckpt.tokenizer, ckpt.model.config.vocab_size
        corrupted = _parse_ids(args.patch) if args.ids is not None else tok.encode(args.patch).ids
        target, foil = (None if t is None else resolve_target(t, tok, V, option)
                        for t, option in ((args.target, "--target"), (args.foil, "--foil")))
        patching = activation_patching(ckpt.model, ids, corrupted, target, foil, positional_encoding=not args.no_pe,
                                       causal=not args.bidirectional)
    if args.head_scores:
        from model.explain.heads import head_scores

        heads = head_scores(ckpt.model, ckpt.tokenizer)
    return patching, heads


def _sampling(args):
    """The Sampling that ``--generate`` asks for, or None; ValueError on options that do not fit."""
    sampling_options = args.top_p is not None or args.seed is not None or args.temperature != 0
    if args.generate is None:
        if sampling_options:
            raise ValueError("--temperature, --top-p and --seed go with --generate")
        return None
    if args.generate < 0:
        raise ValueError(f"--generate takes how many tokens to add (0 or more), got {args.generate}")
    if args.temperature == 0 and (args.top_p is not None or args.seed is not None):
        raise ValueError("--top-p and --seed are for sampling: give --temperature above 0 (0 is greedy)")
    from model.generate import Sampling

    top_k = args.top_k if args.temperature > 0 else None
    return Sampling(args.temperature, top_k or None, args.top_p, 0 if args.seed is None else args.seed)


def _generate(args, ckpt, ids, sampling, text: str | None) -> dict | None:
    """``generated``: the ids, their names, the text they add after the input (``text``, or the
    rendering of the input ids: :meth:`model.Tokenizer.render`) and the probabilities, or None."""
    if sampling is None:
        return None
    from model.generate import generate

    steps = generate(ckpt.model, ids, args.generate, sampling, positional_encoding=not args.no_pe,
                     causal=not args.bidirectional)
    new = [s.token_id for s in steps]
    tok = ckpt.tokenizer
    how = "greedy" if sampling.greedy else (
        f"sampled at temperature {sampling.temperature:g}" + (f", top-k {sampling.top_k}" if sampling.top_k else "")
        + (f", top-p {sampling.top_p:g}" if sampling.top_p is not None else "") + f", seed {sampling.seed}")
    return {
        "ids": new,
        "tokens": token_names(tok, new),
        "text": tok.render(new, tok.decode(ids) if text is None else text)[0] if tok is not None else None,
        "prob": [s.prob for s in steps],  # under the sampling distribution (1 for greedy)
        "model_prob": [s.model_prob for s in steps],  # under the model's own softmax
        "how": how,
        "sampling": {"temperature": sampling.temperature, "top_k": sampling.top_k, "top_p": sampling.top_p,
                     "seed": sampling.seed},
    }


if __name__ == "__main__":
    sys.exit(main())
