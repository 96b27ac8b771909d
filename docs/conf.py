"""Sphinx configuration of the funcdiff documentation.

Build with ``sphinx-build -W -b html docs docs/_build/html`` (warnings are errors).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
sys.path.insert(0, str(DOCS / "_ext"))
sys.path.insert(0, str(DOCS.parent))

# Notebooks are executed during the build; figures must not try to open windows.
# The site needs the figures inline, whatever the environment says.
os.environ["MPLBACKEND"] = "module://matplotlib_inline.backend_inline"

import funcdiff  # noqa: E402

project = "funcdiff"
author = "the funcdiff developers"
copyright = "the funcdiff developers"  # noqa: A001
release = funcdiff.__version__
version = ".".join(release.split(".")[:2])

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "numpydoc",
    "myst_nb",
    "funcdiff_docs",
]

source_suffix = {".rst": "restructuredtext", ".md": "myst-nb", ".ipynb": "myst-nb"}
root_doc = "index"
exclude_patterns = ["_build", "**.ipynb_checkpoints", "README.md"]
templates_path = ["_templates"]

# --------------------------------------------------------------------------- API reference
autosummary_generate = True
autosummary_imported_members = True
autodoc_default_options = {"members": False}
autodoc_typehints = "none"  # the numpydoc sections already give the types
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_validation_checks: set[str] = set()
numpydoc_xref_param_type = False

# --------------------------------------------------------------------------- MyST / notebooks
myst_enable_extensions = ["colon_fence", "dollarmath", "amsmath", "deflist"]
myst_heading_anchors = 3
nb_execution_mode = "force"
nb_execution_timeout = 120
nb_execution_raise_on_error = True
nb_execution_show_tb = True
nb_merge_streams = True

# --------------------------------------------------------------------------- HTML
html_theme = "pydata_sphinx_theme"
html_title = f"funcdiff {release}"
html_static_path = ["_static"]
html_css_files = ["funcdiff.css"]
html_theme_options = {
    "navbar_align": "left",
    "header_links_before_dropdown": 6,
    "show_toc_level": 2,
    "secondary_sidebar_items": ["page-toc"],
    "footer_start": ["copyright"],
    "footer_end": ["sphinx-version"],
}
# The user-guide pages have no sub-pages: no empty "Section Navigation" column for them.
html_sidebars = {
    page: []
    for page in (
        "index",
        "getting_started",
        "concepts",
        "functional",
        "sparse",
        "replay",
        "supported",
        "verifying",
        "optimization",
        "implicit",
        "performance",
        "migrating",
    )
}
html_show_sourcelink = False
