"""The one error type of the model-file loader."""


class SpecError(ValueError):
    """A model file that cannot be read, validated or built.

    The message names the file and the key path of the offending value, e.g.
    `model.json: cells[0].sections[1].length: must be > 0, got -5`.

    **Attributes:**

    - `file`: the model file, as given to `load_spec`.
    - `where`: the key path (`""` for the whole file).
    - `problem`: what is wrong there.
    """

    def __init__(self, file: str, where: str, problem: str):
        self.file = file
        self.where = where
        self.problem = problem
        prefix = f"{file}: {where}: " if where else f"{file}: "
        super().__init__(prefix + problem)

    def __reduce__(self):
        return type(self), (self.file, self.where, self.problem)
