"""Build hook: the optional compiled parser, and the Spark entry module in editable installs
(metadata is in setup.cfg).

Where a C compiler and the Python headers are present the extension
``natsjs_sync.protocol._speedups`` is built; where not, the install goes on
without it and the pure-Python parser is used (``optional=True``).

PySpark finds the ``jetstream`` data source by listing top-level modules with
``pkgutil.iter_modules()``. A wheel install puts ``pyspark_jetstream.py`` in
site-packages, where that listing sees it. An editable install (``pip install
-e .``) serves modules through setuptools' import hook instead, which the
listing does not see; so an editable build also writes a copy of that
three-line module into site-packages (removed by ``pip uninstall`` like any
installed file). The package itself stays editable.
"""

from pathlib import Path

from setuptools import Command, Extension, setup
from setuptools.command.build import build

SPARK_ENTRY = "pyspark_jetstream.py"


class build_spark_entry(Command):
    """Editable builds only: put a copy of ``pyspark_jetstream.py`` beside the editable hook."""

    description = "install the Spark data source entry module where pkgutil.iter_modules() lists it"
    user_options: list[tuple[str, str | None, str]] = []
    editable_mode = False  # set by setuptools' editable_wheel on every build sub-command

    def initialize_options(self) -> None:
        pass

    def finalize_options(self) -> None:
        pass

    def run(self) -> None:
        if not self.editable_mode:
            return  # a wheel carries the module already (py_modules in setup.cfg)
        # editable_wheel points install_lib at the root of the wheel it is making.
        target = Path(self.get_finalized_command("install").install_lib, SPARK_ENTRY)
        target.parent.mkdir(parents=True, exist_ok=True)
        source = Path(__file__).resolve().parent / SPARK_ENTRY
        target.write_bytes(source.read_bytes())

    def get_outputs(self) -> list[str]:
        return []

    def get_output_mapping(self) -> dict[str, str]:
        return {}


class build_with_spark_entry(build):
    sub_commands = [*build.sub_commands, ("build_spark_entry", None)]


setup(
    ext_modules=[
        Extension("natsjs_sync.protocol._speedups", ["natsjs_sync/protocol/_speedups.c"], optional=True),
    ],
    cmdclass={"build": build_with_spark_entry, "build_spark_entry": build_spark_entry},
)
