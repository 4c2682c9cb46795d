"""`python -m stable_ode`: see `stable_ode._cli`."""

from ._xla import _command_line_default


# Before JAX initialises: small models' loops compiled into one function (see
# `set_cpu_small_loop_bytes`; XLA_FLAGS naming the threshold overrides it).
_command_line_default()

from ._cli import main  # noqa: E402


raise SystemExit(main())
