"""Lesson 13: training with the course's kernels — the backward pass of the chunked forms.

- `chunked`: the backward in PyTorch, written as the equations, for every mixer of the family
- `kernels`: the backward as Triton kernels
- `train`: `trainable(mixer)`, the chunked form as a `torch.autograd.Function` with the course's backward
- `backward.cost`: the bytes the forward keeps for the backward, the FLOPs of each, a GPU time model
"""

from kimik3_lessons.backward.chunked import chunked_backward, chunked_forward
from kimik3_lessons.backward.train import trainable

__all__ = ["chunked_backward", "chunked_forward", "trainable"]
