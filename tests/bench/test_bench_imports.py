"""The GPU benchmark's modules, with the Triton tile table and the accuracy rule they read,
import neither torch nor triton: the benchmark's arguments and report work without them."""

from __future__ import annotations

import subprocess
import sys


def test_the_table_imports_neither_torch_nor_triton():
    code = (
        "import sys, attention_lib.flash.triton.configs, attention_lib.flash.accuracy, "
        "attention_course.bench, attention_course.bench.cli, attention_course.bench.gpu, "
        "attention_course.bench.results, attention_course.lessons.gpu; "
        "loaded = [m for m in ('torch', 'triton') if m in sys.modules]; assert not loaded, loaded"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
