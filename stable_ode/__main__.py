"""`python -m stable_ode`: see `stable_ode._cli`."""

from ._cli import command_line


raise SystemExit(command_line())
