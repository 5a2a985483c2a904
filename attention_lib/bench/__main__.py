"""``python -m attention_lib.bench``: the benchmark suite (`attention_lib.bench.cli`)."""

from .cli import main

__all__: list[str] = []

if __name__ == "__main__":
    raise SystemExit(main())
