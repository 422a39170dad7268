"""The Dask workers' preload: what every item imports and loads, done before the worker joins the cluster.

A worker's first item otherwise spends seconds importing LangGraph and the OpenAI client and loading the
embedder before its first call. At the start of an experiment every worker pays that at once; but a worker
the nanny restarts after its process was killed joins cold, and the scheduler hands it the lost item (or the
next one) while the surviving worker may have nothing left to do: measured, 7 to 15 s without any call.
Loaded here (``dask worker --preload eval.dask_preload --preload-argv EMBEDDER``; the LocalCluster that
``eval.cluster`` starts passes it), the restarted worker joins warm.
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
