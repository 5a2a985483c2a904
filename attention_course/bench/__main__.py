"""``python -m attention_course.bench``: the benchmark suite (`attention_course.bench.cli`)."""

from .cli import main

__all__: list[str] = []

if __name__ == "__main__":
    raise SystemExit(main())
