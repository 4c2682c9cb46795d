"""The model-file `ions` key (top level and per cell) and the record
`variable` key: values reach the model, errors name their key path."""

import copy

import numpy as np
import pytest

import stable_ode as so


BASE = {
    "format": "stable_ode.model/1",
    "t_stop": 0.1,
    "cells": [
        {
            "name": "c",
            "sections": [
                {"name": "soma", "length": 20.0, "diameter": 20.0},
                {"name": "dend", "length": 40.0, "diameter": 2.0, "parent": "soma"},
            ],
            "mechanisms": [
                {"name": "ion_mechanisms:CaChan1", "params": {"imax": 0.01}},
                {"name": "ion_mechanisms:CaPool", "sections": ["soma"]},
            ],
            "ions": [{"name": "ca", "sections": ["dend"], "outside": 4.0}],
        }
    ],
    "ions": {"ca": {"inside": 1e-4, "outside": 3.0}, "k": {"reversal": -85.0}},
    "record": [
        {"name": "cai", "cell": "c", "section": "soma", "variable": "cai"},
        {"name": "cao_dend", "cell": "c", "section": "dend", "variable": "cao"},
        {"name": "eca_dend", "cell": "c", "section": "dend", "variable": "eca"},
        {"name": "ek", "cell": "c", "section": "soma", "variable": "ek"},
        {"name": "v", "cell": "c", "section": "soma"},
    ],
    "integration": {"dt": 0.025, "dtype": "float64"},
}


def test_ions_reach_the_model():
    loaded = so.load_spec(copy.deepcopy(BASE))
    rec = loaded.simulate().recordings
    assert float(rec["cai"][0]) == 1e-4
    assert float(rec["cao_dend"][0]) == 4.0
    np.testing.assert_allclose(
        float(rec["eca_dend"][0]), float(so.nernst(1e-4, 4.0, 2, 6.3)), rtol=1e-13
    )
    assert float(rec["ek"][0]) == -85.0
    assert float(rec["v"][0]) == -65.0


def _edit(path, value):
    raw = copy.deepcopy(BASE)
    node = raw
    for k in path[:-1]:
        node = node[k]
    node[path[-1]] = value
    return raw


@pytest.mark.parametrize(
    "path, value, where",
    [
        (("ions", "ca", "inside"), -1.0, "ions.ca.inside"),
        (("ions", "ca", "insid"), 1.0, "ions.ca"),
        (("ions", "cl"), {"valence": 1.5}, "ions.cl.valence"),
        (("ions", "1x"), {}, "ions.1x"),
        (("cells", 0, "ions", 0, "sections"), ["axon"], "cells[0].ions[0].sections[0]"),
        (("cells", 0, "ions", 0, "reversal"), "high", "cells[0].ions[0].reversal"),
        (("cells", 0, "ions", 0, "valence"), 2, "cells[0].ions[0]"),
        (("record", 0, "variable"), "m_hh", "record[0].variable"),
        (("record", 0, "variable"), "nai", "record[0].variable"),
    ],
)
def test_errors_at_key_path(path, value, where):
    with pytest.raises(so.SpecError) as e:
        so.load_spec(_edit(path, value))
    assert where in str(e.value), str(e.value)
