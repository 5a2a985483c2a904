"""attention_course: what the course's notebooks show, on the attention_lib library.

A house of floors, each importing only from the floors below and from attention_lib
(tests/project/test_layering.py reads every import):

    graded/           the teacher's graded edition of 02 and 07 for nbgrader: made from the
                      course notebooks, graded by the exercises' checkers
    explorers/        the slider apps and ask-before-telling widgets the notebooks display;
                      one registry of them
    lessons/          the course's experiments, figures and exercise checkers, filed by idea
    bench · model/    the benchmark command (CPU and GPU suites); the small trained model
                      (corpus, model, training, weights, report)
"""
