"""Lesson 13: training with the course's kernels — the backward pass of the chunked forms.

`chunked`: the backward in PyTorch, written as the equations, for every mixer of the family.
"""

from kimik3_lessons.backward.chunked import chunked_backward, chunked_forward

__all__ = ["chunked_backward", "chunked_forward"]
