"""The research bench: experiments on the reference kernels, kept apart from the shipped package.

Nothing here is installed or shipped (pyproject.toml's packages and MANIFEST.in leave it out):
``bench/candidates`` (kernels measured for the top of the ladder, with every build knob the
research used), the measuring tools beside it, CUTLASS's build (``cutlass_sm80/``) and
``NOTES.md``, the diary of what was tried and measured. README.md has one line per entry. Run the
tools from a checkout (``python3 bench/perf_candidates.py --help``); they import the project
beside them.
"""
