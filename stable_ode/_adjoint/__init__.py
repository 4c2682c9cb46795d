"""Reverse-mode configuration: recursive checkpointing chosen by what the user knows
(`Checkpointing`), and a check of float32 gradients against a better-conditioned
probe (`gradient_check`)."""

from .checkpointing import (
    checkpoint_bytes as checkpoint_bytes,
    Checkpointing as Checkpointing,
    DEFAULT_MEMORY_BYTES as DEFAULT_MEMORY_BYTES,
)
from .gradient_check import (
    gradient_check as gradient_check,
    GradientCheck as GradientCheck,
)
