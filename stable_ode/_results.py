"""Result codes of stable_ode, extending `diffrax.RESULTS` (as diffrax extends
optimistix's).

diffrax's integration loop only accepts members of `diffrax.RESULTS` from a step-size
controller, so our controllers report `diffrax.RESULTS.dt_min_reached` to stop the
loop and keep their own, more specific code (a member of `stable_ode.RESULTS`) in
their controller state; `stable_ode.simulate` reads it from there (through
`SaveAt(controller_state=True)`) and reports it in `Simulation.result`.
"""

import diffrax as dfx


class RESULTS(dfx.RESULTS):  # pyright: ignore[reportGeneralTypeIssues]
    nonfinite_max_rejections = (
        "A step produced a non-finite (NaN or ±inf) state or error estimate, and so "
        "did every retry with a smaller step, up to the maximum number of "
        "consecutive non-finite rejections (`max_nonfinite`). The solve stopped at "
        "the start of that step; the solution up to there is kept."
    )
    nonfinite_dt_min = (
        "A step produced a non-finite (NaN or ±inf) state or error estimate, and "
        "shrinking it further would take the step below `dtmin` (or within 128 ulp "
        "of `t`: no real progress). The solve stopped at the start of that step; "
        "the solution up to there is kept."
    )
    event_overflow = (
        "A NetCon source (a compartment's voltage crossing a threshold) fired more "
        "often than its ring buffer of in-flight spikes holds (NetCon max_pending), "
        "or a SpikeRecording recorded more than its max_spikes: spikes would be "
        "lost. The solve ran on; the time is the first lost spike's. Raise "
        "max_pending or max_spikes."
    )
    event_order = (
        "The NetCon delays of the model (changed after build, e.g. with "
        "eqx.tree_at) put the arrivals of spike-time or NetStim sources out of the "
        "order they were sorted in at build time, so they were not delivered "
        "correctly. Build the model again with the new delays."
    )
