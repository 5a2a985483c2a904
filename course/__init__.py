"""The course's own commands, with nothing but Python's standard library.

``python -m course lab``, ``python -m course test`` and ``python -m course
check`` are the README's three commands without ``make`` (Windows has none);
``make lab``, ``make test`` and ``make check`` run the same code. By job:

- `environment`: the course's virtual environment (.venv), made and brought
  up to date from pyproject.toml;
- `lab`: JupyterLab on the learner's copies of the notebooks, on localhost,
  with the course's settings;
- `colab`: the guarded set-up cell every notebook opens with, and the
  addresses README.md and docs/teachers.md give (the "Open in Colab" links,
  the Binder badge, the hub's clone command and link), generated from
  pyproject.toml's ``[project.urls]``;
- `site`: the static site of the executed course.

Nothing here imports ``attention_lib``: the course uses the library, never
the other way round.
"""
