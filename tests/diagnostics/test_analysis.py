"""`spike_times`: upward threshold crossings, linearly interpolated."""

import jax.numpy as jnp
import numpy as np
import pytest

import stable_ode as so


def test_interpolated_upward_crossings_only():
    t = np.arange(6.0)
    v = np.array([-10.0, 10.0, 30.0, -30.0, -10.0, 30.0])
    # Up at 0.5 (between samples 0, 1) and at 4.25 (samples 4, 5); the fall between
    # samples 2 and 3 is not a spike.
    np.testing.assert_array_equal(so.spike_times(t, v), [0.5, 4.25])
    np.testing.assert_array_equal(so.spike_times(t, v, threshold=20.0), [1.5, 4.75])


def test_sample_at_threshold_counts_once_and_start_above_is_no_spike():
    t = np.arange(5.0)
    assert so.spike_times(t, np.array([-1.0, 0.0, 0.0, 1.0, 2.0])).tolist() == [1.0]
    assert so.spike_times(t, np.array([5.0, 6.0, 7.0, 8.0, 9.0])).size == 0
    assert so.spike_times(t[:1], np.array([5.0])).size == 0


def test_non_finite_samples_make_no_crossing():
    t = np.arange(4.0)
    v = np.array([-1.0, np.nan, 1.0, np.inf])
    assert so.spike_times(t, v).size == 0


def test_float32_and_jax_inputs_give_float64_times():
    t = jnp.arange(3, dtype=jnp.float32) * 0.1
    v = jnp.array([-1.0, 2.0, 3.0], dtype=jnp.float32)
    s = so.spike_times(t, v)
    assert s.dtype == np.float64
    np.testing.assert_allclose(s, [np.float64(np.float32(0.1)) / 3], rtol=1e-15)


@pytest.mark.parametrize(
    "t, v, threshold, match",
    [
        (np.zeros((2, 3)), np.zeros((2, 3)), 0.0, "`t` must be 1-d"),
        (np.arange(3.0), np.zeros(4), 0.0, "`v` must have the shape of `t`"),
        (np.arange(3.0), np.zeros(3), np.nan, "`threshold` must be finite"),
    ],
)
def test_bad_input_names_the_argument(t, v, threshold, match):
    with pytest.raises(ValueError, match=match):
        so.spike_times(t, v, threshold)
