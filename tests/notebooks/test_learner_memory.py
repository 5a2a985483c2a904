"""What a learner's kernel holds after the first notebooks: each cut of issue 38 pinned.

Memory sizes a class's hub (``benchmarks/learner_memory.py`` measures it per
learner). These tests pin what was cut, by what the kernel holds, not by a
number of bytes measured on this machine:

- notebooks 01 and 02 read the trained model in numpy (`attention_course.model.weights`),
  and 00 checks torch in a second Python (`attention_course.lessons.environment`):
  after their code cells have run in a fresh interpreter, torch is not loaded
  (it cost each kernel about 150 MiB);
- the corpus the model reads holds one string per word, shared by its 50,000
  sentences (about 30 MiB);
- the slots explorer keeps what its slider positions show, not its draws (20 MB);
- notebook 02 lets go of its 80 MB of samples once its table is printed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from labdriver import REPO

# Runs a notebook's code cells in this interpreter, as a kernel would, and prints what it
# holds then. A cell tagged raises-exception may raise; any other error fails the run.
_RUN_CELLS = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    import matplotlib
    matplotlib.use("Agg")
    notebook = json.load(open(sys.argv[1], encoding="utf-8"))
    names = {"__name__": "__main__"}
    for cell in notebook["cells"]:
        if cell["cell_type"] != "code":
            continue
        try:
            exec(compile("".join(cell["source"]), "cell", "exec"), names)
        except Exception:
            if "raises-exception" not in cell["metadata"].get("tags", []):
                raise
    arrays = {k: v.nbytes for k, v in names.items() if isinstance(v, np.ndarray)}
    print(json.dumps({"torch": "torch" in sys.modules, "arrays": arrays}))
    """
)


def run_code_cells(notebook: str) -> dict:
    env = dict(os.environ, PYTHONPATH=str(REPO), MPLBACKEND="Agg")
    out = subprocess.run(
        [sys.executable, "-c", _RUN_CELLS, str(REPO / "notebooks" / notebook)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.splitlines()[-1])


@pytest.mark.parametrize(
    "notebook",
    ["00_start_here.ipynb", "01_beginner_crowded_room.ipynb", "02_developer_scaling.ipynb"],
)
def test_the_first_notebooks_run_without_torch(notebook):
    held = run_code_cells(notebook)
    assert not held["torch"], f"{notebook}'s code cells imported torch"
    # the page's own globals: nothing of the size of 02's samples (2 x 20,000 x 256 floats)
    large = {name: size for name, size in held["arrays"].items() if size > 2**20}
    assert not large, f"{notebook} keeps large arrays in its names: {large}"


def test_reading_the_trained_model_does_not_import_torch():
    code = textwrap.dedent(
        """
        import sys
        from attention_course.explorers import HeadMapsExplorer, WhereItLooksExplorer
        from attention_course.model.views import attention_maps, volume_sweep, where_it_looks
        where_it_looks(volume=3.0), attention_maps(), volume_sweep(volumes=(1.0,))
        assert "torch" not in sys.modules, "torch was imported"
        """
    )
    env = dict(os.environ, PYTHONPATH=str(REPO), MPLBACKEND="Agg")
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr[-3000:]


def test_the_corpus_holds_one_string_per_word():
    from attention_course.model.corpus import build_corpus

    corpus = build_corpus()
    sentences = [s for split in (corpus.train, corpus.heldout) for f in split.values() for s in f]
    strings = {id(w) for s in sentences for w in s.words}
    assert len(strings) <= len(corpus.vocab), (
        f"{len(strings)} word strings for a vocabulary of {len(corpus.vocab)}"
    )
    assert not hasattr(sentences[0], "__dict__"), "a Sentence carries a __dict__ (no slots)"


def test_the_slots_explorer_keeps_what_it_shows_not_its_draws():
    from attention_course.explorers import SlotsExplorer

    e = SlotsExplorer(pairs=2000, trials=1000)
    held = [
        a
        for value in vars(e).values()
        for a in (value.values() if isinstance(value, dict) else [value])
        if isinstance(a, np.ndarray)
    ]
    largest = max(a.size for a in held)
    assert largest <= 2000, f"the explorer holds an array of {largest} numbers: a draw"
