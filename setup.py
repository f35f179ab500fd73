"""Build hook: the optional compiled parser (metadata is in setup.cfg).

Where a C compiler and the Python headers are present the extension
``natsjs_sync.protocol._speedups`` is built; where not, the install goes on
without it and the pure-Python parser is used (``optional=True``).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension("natsjs_sync.protocol._speedups", ["natsjs_sync/protocol/_speedups.c"], optional=True),
    ],
)
