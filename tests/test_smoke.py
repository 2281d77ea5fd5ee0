import torch

import batched_grad as bg
from oracle import check_op, rand


def test_mul_tanh_sum_against_torch():
    check_op(lambda a, b: bg.tanh(a * b).sum(), lambda a, b: torch.tanh(a * b).sum(), [rand(3, 4), rand(4)])


def test_matmul_against_torch():
    check_op(bg.matmul, torch.matmul, [rand(3, 4), rand(4, 2)])
