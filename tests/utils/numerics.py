"""Float32 tolerances derived from the arithmetic, not from what one processor happened to give.

Two correct float32 implementations of the same formula differ only in the order of their sums: AVX2,
AVX-512 and AMX kernels, MKL and oneDNN, blocked and plain loops all add the terms of a dot product in
different orders. For a dot product of n terms the difference from the exact value is, with high
probability, at most about sqrt(n) * u * sum|x_i * y_i| (Higham & Mary 2019, "A new approach to
probabilistic rounding error analysis"), u = 2**-24 the unit roundoff of float32. Each model output ends a
chain of `stages` such products (char CNN, highway layers, projection, and per biLSTM layer the input,
recurrent and projection products); the activations between them (sigmoid, tanh, relu, clips) are
1-Lipschitz, so a stage's error reaches the next one no larger. Using the largest magnitude compared as the
scale of the sums gives

    tolerance = stages * sqrt(n) * u * magnitude

which a real error (wrong gate order, missing clip, wrong weight layout) exceeds by orders of magnitude,
while a one-ulp change of the weights stays inside it (tests/models/test_parity.py checks both directions).
"""

from __future__ import annotations

import math

import numpy as np

FLOAT32_UNIT_ROUNDOFF = 2.0**-24


def float32_tolerance(magnitude: float, sum_length: int, stages: int = 1) -> float:
    """Largest difference expected between two correct float32 implementations (see the module docstring)."""
    return stages * math.sqrt(sum_length) * FLOAT32_UNIT_ROUNDOFF * float(magnitude)


def magnitude(*arrays) -> float:
    """The largest absolute value among the arrays or tensors given."""
    return max(float(np.abs(np.asarray(getattr(a, "detach", lambda: a)(), dtype=np.float64)).max()) for a in arrays)


def lstm_tolerance(config, *expected) -> float:
    """`float32_tolerance` for biLSTM outputs alone (three products per layer, the longest over the cell)."""
    longest = max(config.lstm_cell_dim, config.projection_dim)
    return float32_tolerance(magnitude(*expected), longest, 3 * config.num_lstm_layers)


def bilm_stages(config) -> int:
    """Products an output of the biLM depends on within one time step: CNN, highways, projection, 3 per layer."""
    return 1 + config.num_highway_layers + 1 + 3 * config.num_lstm_layers


def bilm_sum_length(config) -> int:
    """The longest dot product of the biLM: a convolution window, a highway row (all filters), the cell."""
    widest_window = max(width for width, _ in config.char_cnn_filters) * config.char_embedding_dim
    filters = sum(count for _, count in config.char_cnn_filters)
    return max(widest_window, filters, config.lstm_cell_dim, config.projection_dim)


def bilm_tolerance(config, *expected) -> float:
    """`float32_tolerance` for the outputs of a biLM with `config` whose reference values are `expected`."""
    return float32_tolerance(magnitude(*expected), bilm_sum_length(config), bilm_stages(config))


def char_encoder_tolerance(config, *expected) -> float:
    """`float32_tolerance` for token vectors: the CNN, the highway layers and the projection."""
    filters = sum(count for _, count in config.char_cnn_filters)
    return float32_tolerance(magnitude(*expected), filters, 1 + config.num_highway_layers + 1)
