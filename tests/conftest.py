import jax


# As diffrax's test-suite: 64-bit by default, strict promotion so that no silent
# float64 upcast hides in float32 code paths. float32 tests build float32 models.
jax.config.update("jax_enable_x64", True)
jax.config.update("jax_numpy_dtype_promotion", "strict")
jax.config.update("jax_numpy_rank_promotion", "raise")
