"""`python -m benchmarks --quick` runs and writes one flat JSON object of finite figures.

No timing is asserted here: speed is the benchmark's business, not the tests'.
"""

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import SAFETY_NET_S

ROOT = Path(__file__).resolve().parents[1]
REQUIRED = [
    "keystroke_ms_median_t32", "keystroke_ms_p95_t32", "trace_overhead_ratio", "big_model_max_stall_ms",
    "train_throughput_ratio", "memory_growth_mb_1000_edits", "startup_s_median",
    "keystroke_ms_median_t1", "keystroke_ms_median_t16", "keystroke_model_ms_median_t32",
    "keystroke_paint_ms_median_t32", "big_model_ms_t1024", "big_model_open_s", "explain_ms_t32",
    "explain_loo_ms_t32", "big_model_paste_max_stall_ms",
    "big_model_append_ms_t512", "big_model_full_ms_t512", "big_model_trace_mb_t1024",
    "big_model_memory_growth_mb_200_edits", "big_model_keystroke_ms_t512", "big_model_keystroke_max_stall_ms_t512",
    "snapshot_step_ms_median", "keystroke_ms_median_t32_why", "why_drawn_ms_median_t32",
    "big_model_why_job_ms_t512", "startup_model_s_median", "import_torch_s_median", "startup_window_over_import_torch",
    # issue 28: paints, every panel in front, the first keystroke after opening, typing steadily
    "keystroke_paints_t32", "keystroke_max_turn_ms_t32", "keystroke_traced_off_gui_thread_t32",
    "panel_attention_keystroke_ms_median", "panel_training_keystroke_ms_median", "panel_why_keystroke_ms_median",
    "panel_training_drawn_ms_median", "panel_why_drawn_ms_median", "panel_formula_paints", "panel_qkv_max_turn_ms",
    "big_model_open_idle_s", "big_model_first_keystroke_ms_t520", "big_model_first_keystroke_model_ms_t520",
    "big_model_first_keystroke_max_stall_ms_t520", "big_model_typing_results", "big_model_typing_result_gap_ms_max",
    "big_model_typing_last_result_ms", "big_model_typing_last_result_traces", "big_model_typing_max_stall_ms",
]
#: Every registered panel but the text is measured in front (a panel added to PANELS is too).
PANEL_FIGURES = ("keystroke_ms_median", "keystroke_ms_p95", "drawn_ms_median", "paints", "max_turn_ms")


@pytest.mark.slow
def test_quick_benchmark_writes_well_formed_json(tmp_path):
    out = tmp_path / "bench.json"
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    res = subprocess.run([sys.executable, "-m", "benchmarks", "--quick", "--json", str(out)],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=SAFETY_NET_S)
    assert res.returncode == 0, res.stderr[-2000:]
    figures = json.loads(out.read_text())
    assert isinstance(figures, dict)
    for key in REQUIRED:
        assert key in figures, key
    from explorer.qt.panels import panel_names

    for name in panel_names():
        for figure in PANEL_FIGURES if name != "tokens" else ():
            assert f"panel_{name}_{figure}" in figures, (name, figure)
    assert figures["keystroke_paints_t32"] >= 1
    for key, value in figures.items():
        assert isinstance(value, (int, float)) and math.isfinite(value), (key, value)
    assert figures["big_model_final_matches_text"] == 1.0  # what is shown matches the typed text
    assert figures["keystroke_ms_p95_t32"] >= figures["keystroke_ms_median_t32"] > 0
    assert 0 < figures["trace_overhead_ratio"] and 0 < figures["train_throughput_ratio"]
    assert "trace_overhead_ratio" in res.stdout  # the table names every figure too
    assert "paints per keystroke; most:" in res.stdout  # and the widgets that paint most
