"""nbgrader's settings for the graded edition: this folder is the nbgrader course directory.

source/ and release/ are generated (python -m course graded) and committed; submitted/,
autograded/, feedback/ and gradebook.db are the teacher's, never committed.
"""

c = get_config()  # noqa: F821 (nbgrader's config loader defines it)

c.CourseDirectory.course_id = "attention-course"
# a learner who deleted or moved a test cell is graded all the same: nbgrader puts the
# teacher's version back (with a note saying so) instead of failing the notebook
c.OverwriteCells.add_missing_cells = True
# the learner's function stays defined (so the checker cell under it can run) and says
# it is not written yet, as the course's starters do
c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}
# each cell: the checkers limit the learner's code to 20 s, the Triton child to its own
c.Execute.timeout = 180
