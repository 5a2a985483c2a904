"""The backward pass's memory traffic in the cost model, counted by hand on small cases."""

from __future__ import annotations

import pytest

from attention_course.lessons.cost import attention_traffic, format_traffic_table


def test_standard_forward_and_backward_counts():
    n, d = 4, 2  # N² = 16, Nd = 8
    fwd = attention_traffic(n, d, "standard", "forward")
    # read Q, K (16) | write S (16) | read S (16) | write P (16) | read P (16), V (8) | write O (8)
    assert (fwd.reads, fwd.writes) == (16 + 16 + 16 + 8, 16 + 16 + 8)
    bwd = attention_traffic(n, d, "standard", "backward")
    # reads: P, dO | dO, V | P, dP | dS, K | dS, Q  = 5 N² + 5 Nd
    # writes: dV | dP | dS | dQ | dK               = 2 N² + 3 Nd
    assert (bwd.reads, bwd.writes) == (5 * 16 + 5 * 8, 2 * 16 + 3 * 8)
    assert (fwd.flops, bwd.flops) == (4 * 16 * d, 8 * 16 * d)
    assert fwd.saved == bwd.saved == n * n  # P is kept for the backward pass


def test_flash2_backward_counts_per_block():
    n, d, b = 4, 2, 2  # two key blocks (T_c = 2), two query blocks
    bwd = attention_traffic(n, d, "flash2", "backward", block_q=b, block_k=b)
    nd = n * d
    # D: read dO, O (2 Nd), write D (N); dQ = 0 written (Nd); per key block K_j, V_j read and
    # dK_j, dV_j written (2 Nd each in all); per key block every Q_i, O_i, dO_i, dQ_i, L_i, D_i
    # read (4 Nd + 2 N) and dQ_i written back (Nd)
    assert bwd.reads == 2 * nd + 2 * nd + 2 * (4 * nd + 2 * n)
    assert bwd.writes == n + nd + 2 * nd + 2 * nd
    assert bwd.flops == 10 * n * n * d  # recomputing S adds 2 N² d to the standard 8 N² d
    assert bwd.saved == n  # only the log-sum-exp L
    fwd = attention_traffic(n, d, "flash2", "forward", block_q=b, block_k=b)
    assert (fwd.reads, fwd.writes) == (nd + 2 * 2 * nd, nd + n)


def test_a_short_last_block_is_still_a_pass():
    assert attention_traffic(5, 2, "flash2", "backward", 2, 2).reads == (
        4 * 10 + 3 * (4 * 10 + 2 * 5)  # T_c = ceil(5 / 2) = 3
    )


def test_flash2_saves_the_quadratic_term_only_up_to_a_constant_in_the_backward():
    """Standard backward: 7N² + 8Nd. FA-2: about 5·N²d/B_c, still quadratic in N: the ratio
    tends to 7·B_c/(5·d), 2.8 for d = 64 and B_c = 128."""
    d, b = 64, 128
    ratios = []
    for n in (1024, 8192, 65536):
        std = attention_traffic(n, d, "standard", "backward")
        fa2 = attention_traffic(n, d, "flash2", "backward", b, b)
        ratios.append(std.elements / fa2.elements)
    assert ratios == sorted(ratios)
    assert ratios[-1] == pytest.approx(7 * b / (5 * d), rel=0.01)
    small = attention_traffic(64, d, "flash2", "backward", b, b)  # one block: linear in N
    assert (small.reads, small.writes) == (8 * 64 * d + 2 * 64, 4 * 64 * d + 64)


def test_bytes_and_table():
    t = attention_traffic(1024, 64, "standard", "backward")
    assert t.bytes("float16") == 2 * t.elements and t.bytes("float32") == 4 * t.elements
    table = format_traffic_table([256, 4096], width=64, block=128, dtype="float16")
    assert table.splitlines()[0].startswith("backward pass, per head, d = 64")
    assert "32.0 MiB" in table  # P at T = 4096 in float16: 4096² x 2 bytes


def test_bad_arguments():
    with pytest.raises(ValueError, match="path"):
        attention_traffic(8, 4, "flash3")
    with pytest.raises(ValueError, match="direction"):
        attention_traffic(8, 4, direction="sideways")
    with pytest.raises(ValueError, match="block_k must be a positive integer"):
        attention_traffic(8, 4, "flash2", block_k=0)


def test_the_traffic_figure_draws_the_counts_and_computes_its_title():
    import matplotlib.pyplot as plt

    from attention_course.lessons.figures import plot_traffic

    fig, ax = plt.subplots()
    plot_traffic(ax, [4096, 1024], width=64, block=128, dtype="float16")
    lines = {line.get_label(): line for line in ax.get_lines()}
    assert set(lines) == {
        "standard, forward",
        "standard, backward",
        "FlashAttention-2, forward",
        "FlashAttention-2, backward",
    }
    backward = attention_traffic(4096, 64, "standard", "backward")
    assert list(lines["standard, backward"].get_xdata()) == [1024, 4096]
    assert lines["standard, backward"].get_ydata()[-1] == backward.bytes("float16") / 2**20
    fa2 = [attention_traffic(t, 64, "flash2", "backward") for t in (1024, 4096)]
    std = [attention_traffic(t, 64, "standard", "backward") for t in (1024, 4096)]
    ratios = [s.elements / f.elements for s, f in zip(std, fa2, strict=True)]
    assert ax.get_title() == (
        f"d = 64, FA-2 tiles 128 × 128: the standard backward pass moves\n{ratios[0]:.1f}× "
        f"(T = 1024) to {ratios[1]:.1f}× (T = 4096) the bytes of FA-2's"
    )
    assert ax.get_ylabel() == "HBM reads + writes per head (MiB, float16)"
    plt.close(fig)
