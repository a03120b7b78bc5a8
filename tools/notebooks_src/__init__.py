"""Python sources of the course's notebooks: each module builds one .ipynb with nbformat.

    python -m tools.notebooks_src.lecture01     # writes lectures/01_collectives.ipynb
    python -m tools.notebooks_src.hw1           # writes assignments/hw1/hw1_collectives.ipynb

The generated notebooks are committed (no outputs, stable cell ids). Edit the module and
rebuild rather than editing the .ipynb by hand, so that the two never disagree.
"""
