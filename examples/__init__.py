"""Runnable scenarios for pytest-nocompile, taken from the PyTorch compiled-optimizer tutorials.

Each scenario module is a script (``python examples/<name>.py``) and a library that
the tests next to it (``examples/test_*.py``, small sizes on CPU) and the CUDA
acceptance tests (``tests/acceptance/``, the tutorials' size) import:

- :mod:`examples.compiled_optimizer`: ``torch.optim.Adam.step`` under ``torch.compile``.
- :mod:`examples.compiled_lr_scheduler`: the same with LR schedulers, tensor and float LR.
- :mod:`examples.foreach_map_adam`: an Adam written with ``foreach_map``, one fused update.
- :mod:`examples.benchmark`: times those against eager Adam and the memory-bandwidth floor.

:mod:`examples.workload` holds what they share: the model, the gradients, the comparison.
"""
