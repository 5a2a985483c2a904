"""The course's own commands, with nothing but Python's standard library.

``python -m course lab`` and ``python -m course test`` are the README's two
commands without ``make`` (Windows has none); ``make lab`` and ``make test``
run the same code. By job:

- `environment`: the course's virtual environment (.venv), made and brought
  up to date from pyproject.toml;
- `lab`: JupyterLab on the learner's copies of the notebooks, on localhost,
  with the course's settings;
- `colab`: the guarded set-up cell every notebook opens with, and the
  README's "Open in Colab" links, generated from pyproject.toml's
  ``[project.urls]``;
- `site`: the static site of the executed course.

Nothing here imports ``attention_lib``: the course uses the library, never
the other way round.
"""
