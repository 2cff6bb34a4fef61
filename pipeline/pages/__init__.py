"""Pages: Altair chart builders (``charts.py``) and Jinja2 rendering into MkDocs' docs_dir (``render.py``).

Pages only read what the analysis stage wrote; they compute nothing that is not already a
measurement or a stated formula.
"""
