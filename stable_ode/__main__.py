"""`python -m stable_ode`: see `stable_ode._cli`."""

from ._cli import main


raise SystemExit(main())
