"""Type aliases shared across the package (as `diffrax/_custom_types.py`)."""

from typing import TypeAlias

from jaxtyping import Array, ArrayLike, Float, Int


#: Membrane potential per compartment, mV.
Voltage: TypeAlias = Float[Array, " ncomp"]
#: Current into each compartment, mA (e.g. the axial current of a coupling).
Current: TypeAlias = Float[Array, " ncomp"]
#: Conductance per compartment, S.
Conductance: TypeAlias = Float[Array, " ncomp"]
#: Membrane current density per compartment, mA/cm².
CurrentDensity: TypeAlias = Float[Array, " ncomp"]
#: Conductance density per compartment, S/cm².
ConductanceDensity: TypeAlias = Float[Array, " ncomp"]
#: Compartment indices a mechanism or stimulus acts on.
Indices: TypeAlias = Int[Array, " n"]
#: A scalar time, ms.
Time: TypeAlias = Float[ArrayLike, ""]
