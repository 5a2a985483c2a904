"""What the launcher asks of a GPU, checked on the CPU with the GPU faked.

The launcher reads the GPU in one place (`launch.gpu`: torch.cuda's
capability and name): a dtype the GPU cannot run is refused there with a
message naming it (`launch.refusal`), before any kernel is compiled, and its
compute capability picks tiles that fit its shared memory. Here torch.cuda's
two functions (or `launch.gpu` itself) are replaced by a T4's, an RTX 3090's,
and so on; no kernel runs.
"""

from __future__ import annotations

import dataclasses
import types

import pytest

from attention_lib.flash.route import Tiling

TILING = Tiling(is_causal=True, scale=0.125)  # the tiles' sizes: the kernels' own

# the kernels take torch tensors; "triton.language", not "triton": with lib/tests on sys.path
# this folder passes for a namespace package named triton
pytest.importorskip("torch", reason="the Triton kernels take torch tensors")
pytest.importorskip(
    "triton.language", reason="triton is not installed (pip install -e '.[triton]', Linux only)"
)

T4_REFUSAL = (
    "bfloat16 needs an sm_80 or newer GPU (Ampere); this Tesla T4 is sm_75: use float16 or float32"
)
# (name, compute capability) of GPUs learners and the course's figures use
GPUS = {
    "Tesla T4": (7, 5),
    "NVIDIA GeForce RTX 3090": (8, 6),
    "NVIDIA GeForce RTX 4090": (8, 9),
    "NVIDIA A100-SXM4-40GB": (8, 0),
    "NVIDIA H200": (9, 0),
}


@pytest.fixture
def fake_gpu(monkeypatch):
    """Make torch.cuda report the named GPU for every device."""
    import torch

    def use(name: str) -> None:
        monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: GPUS[name])
        monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: name)

    return use


def _cuda():
    import torch

    return torch.device("cuda", 0)


def test_the_gpu_is_read_from_torch_cuda(fake_gpu):
    import torch

    from attention_lib.flash.triton import launch

    fake_gpu("Tesla T4")
    assert launch.gpu(_cuda()) == ("Tesla T4", 75)
    fake_gpu("NVIDIA GeForce RTX 4090")
    assert launch.gpu(_cuda()) == ("NVIDIA GeForce RTX 4090", 89)
    assert launch.gpu(torch.device("cpu")) is None  # Triton's interpreter


def test_bfloat16_on_a_t4_is_refused_naming_the_gpu_and_what_to_use(fake_gpu):
    import torch

    from attention_lib.flash.triton import launch

    fake_gpu("Tesla T4")
    refused = launch.refusal(torch.bfloat16, _cuda())
    assert isinstance(refused, ValueError) and str(refused) == T4_REFUSAL
    assert launch.refusal(torch.float16, _cuda()) is None
    assert launch.refusal(torch.float32, _cuda()) is None
    assert launch.refusal(torch.bfloat16, torch.device("cpu")) is None  # the interpreter


@pytest.mark.parametrize("name", [g for g in GPUS if GPUS[g] >= (8, 0)])
def test_bfloat16_runs_from_sm_80(fake_gpu, name):
    import torch

    from attention_lib.flash.triton import launch

    fake_gpu(name)
    for dtype in (torch.float16, torch.bfloat16, torch.float32):
        assert launch.refusal(dtype, _cuda()) is None


def test_plan_refuses_bfloat16_on_a_t4(fake_gpu):
    """`plan` (what backend='triton' raises, and what sends 'auto' to the tiled path)."""
    import torch

    from attention_lib.flash.triton import launch
    from attention_lib.flash.triton.launch import Layout
    from attention_lib.inputs import check

    on_gpu = types.SimpleNamespace(device=_cuda())  # all plan reads of the query here

    def spec(dtype):
        q, k, v = (torch.zeros(2, 3, 8, 64, dtype=dtype) for _ in range(3))  # (B, H, L, E)
        return dataclasses.replace(check(q, k, v, None, True, None, False), query=on_gpu)

    fake_gpu("Tesla T4")
    with pytest.raises(ValueError) as refused:
        launch.plan(spec(torch.bfloat16), TILING)
    assert str(refused.value) == T4_REFUSAL
    assert isinstance(launch.plan(spec(torch.float16), TILING), Layout)
    fake_gpu("NVIDIA GeForce RTX 3090")
    assert isinstance(launch.plan(spec(torch.bfloat16), TILING), Layout)


def test_the_forward_launcher_refuses_before_compiling(monkeypatch):
    """`flash_forward` (which the benchmarks call directly) asks `refusal` too: a bfloat16
    launch on a T4 raises the same ValueError, and no kernel is built."""
    import torch

    from attention_lib.flash.triton import launch

    monkeypatch.setattr(launch, "gpu", lambda device: ("Tesla T4", 75))
    monkeypatch.setattr(launch, "forward_launch", None)  # calling it would be a TypeError
    q = torch.zeros(1, 1, 8, 16, dtype=torch.bfloat16)  # (B, H, L, E)
    with pytest.raises(ValueError) as raised:
        launch.flash_forward(q, q, q, False, 0.25)
    assert str(raised.value) == T4_REFUSAL


@pytest.mark.parametrize("name", list(GPUS))
def test_each_gpu_gets_tiles_for_its_shared_memory(fake_gpu, name):
    """The launcher's tile is `configs.choose`'s for the GPU's compute capability."""
    import torch

    from attention_lib.flash.triton import configs, launch

    fake_gpu(name)
    capability = launch.gpu(_cuda())[1]
    for kernel in configs.KERNELS:
        for width in (64, 128, 256):
            tile = launch.tile_for(
                kernel, torch.float16, width, width, True, None, None, capability
            )
            assert tile == configs.choose(kernel, width, "float16", True, capability)


def test_float32_gradients_at_width_256_are_refused_on_a_t4(fake_gpu):
    """No dK/dV or dQ tile fits sm_75's 64 KiB in float32 at width 256: the forward pass
    runs, a call that wants gradients is refused, naming what fits instead."""
    import torch

    from attention_lib.flash.triton import launch
    from attention_lib.flash.triton.launch import Layout
    from attention_lib.inputs import check

    def spec(grad: bool):
        on_gpu = types.SimpleNamespace(device=_cuda(), requires_grad=grad)
        q, k, v = (torch.zeros(1, 2, 8, 256, requires_grad=grad) for _ in range(3))
        return dataclasses.replace(check(q, k, v, None, False, None, False), query=on_gpu)

    fake_gpu("Tesla T4")
    with pytest.raises(ValueError) as raised:
        launch.plan(spec(True), TILING)
    assert str(raised.value) == (
        "float32 at head width 256 on this Tesla T4 (sm_75): its gradients need more shared "
        "memory per program than it has (64 KiB); use float16, or head widths up to 128, "
        "or backend='tiled'"
    )
    assert isinstance(launch.plan(spec(False), TILING), Layout)  # forward only: fits
    with torch.no_grad():
        assert isinstance(launch.plan(spec(True), TILING), Layout)
    refused = launch.refusal(torch.float32, _cuda(), 200, ("dkdv", "dq"))
    assert "head width 200" in str(refused)
    assert launch.refusal(torch.float32, _cuda(), 128, ("forward", "dkdv", "dq")) is None
    fake_gpu("NVIDIA GeForce RTX 3090")
    assert launch.plan(spec(True), TILING).heads == 2
