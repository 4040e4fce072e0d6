"""Campaigns: a matrix of cells x variants x trace modes x repetitions, recorded and reported.

- :mod:`.matrix`  the TOML matrix and the ordered plan of runs it expands to;
- :mod:`.record`  runs the plan (``specscope profile`` on ``specscope run``, and unprofiled runs);
- :mod:`.results` analyses what was recorded into the results database;
- :mod:`.tables`  the overview, mode-inflation and overhead frames read back from it;
- :mod:`.reports` one ``specscope report`` folder per cell and trace mode, and the overview;
- :mod:`.demo`    ``specscope demo`` over the bundled ``examples/`` exports.
"""
