"""The graded edition of notebooks 02 and 07 for nbgrader: made from the course notebooks
(`edition`), and its submissions graded (`autograde`).

A teacher's tool (the ``teach`` extra brings nbgrader). In a checkout, ``python -m course
graded`` runs it on teachers/graded (docs/teachers.md); elsewhere, ``python -m
attention_course.graded --help``.
"""
