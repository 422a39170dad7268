"""The Dask workers' preload: imports and the embedder loaded before a worker joins the cluster.

A worker the nanny restarts after a kill otherwise joins cold and spends 7 to 15 s on its first item
(``dask worker --preload eval.dask_preload --preload-argv EMBEDDER``; ``eval.cluster``'s LocalCluster passes it).
"""

from __future__ import annotations

from typing import Any

import click


@click.command()
@click.argument("embedder", default="")
def dask_setup(worker: Any, embedder: str) -> None:
    """Import the executor's task and the graphs, and load the index's modules and ``embedder`` (if named)."""
    import eval.cluster  # noqa: F401 - the task's module, and the runner behind it
    import graphs.refine  # noqa: F401 - the graphs an item runs (refine includes summarize and factscore)
    from storyjudge.core import heavy_imports

    heavy_imports.load_before_branches(index=bool(embedder), embedder=embedder or None)
