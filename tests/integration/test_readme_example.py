"""The README's Python example runs as written, in a fresh working directory, against the scripted model.

The README's block names no model (the default: gpt-4o-mini with a key, else the embedded model); here the
``STORYJUDGE_MODEL`` / ``STORYJUDGE_BASE_URL`` environment variables, which every Context field falls back to,
point it at the scripted OpenAI-compatible server, so the block itself is run unchanged.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from storyjudge.core.scripted_server import OpenAIServer
from tests.scripted_story import StoryResponder

ROOT = Path(__file__).resolve().parents[2]


def readme_python() -> str:
    """The README's first Python block."""
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(encoding="utf-8"), re.DOTALL)
    assert blocks, "the README has no Python example"
    return str(blocks[0])


def test_readme_python_example_runs(scripted_server: Callable[..., OpenAIServer], tmp_path: Path) -> None:
    code = readme_python()
    assert '"model"' not in code.replace('no "model"', "")  # offline as written: the default model
    assert "thread_id" in code and "examples/macbeth-witches.md" in code
    server = scripted_server(StoryResponder())
    (tmp_path / "examples").mkdir()
    shutil.copy(ROOT / "examples" / "macbeth-witches.md", tmp_path / "examples")
    script = tmp_path / "readme_example.py"
    script.write_text(code, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("STORYJUDGE_", "OPENAI_API_KEY"))}
    env.update(
        PYTHONPATH=str(ROOT),
        STORYJUDGE_MODEL="openai:scripted",
        STORYJUDGE_BASE_URL=server.base_url,
        STORYJUDGE_RETRY_BUDGET_S="0",
        HF_HUB_OFFLINE="1",
    )
    done = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    run_dirs = [d for d in (tmp_path / "runs").iterdir() if d.is_dir()]
    assert [d.name.startswith("macbeth-witches-") for d in run_dirs] == [True]
    result = json.loads((run_dirs[0] / "result.json").read_text(encoding="utf-8"))
    assert result["iterations"] and (run_dirs[0] / "report.html").is_file()
    assert str(run_dirs[0].relative_to(tmp_path)) in done.stdout  # the printed run directory
    first = result["iterations"][0]["factscore"]
    shown = "reliable" if first["reliable"] else "NOT reliable"
    assert f"round 0: NFS {first['score']}, coverage {first['coverage']}, {shown}" in done.stdout
    assert (tmp_path / "runs" / "checkpoints.sqlite").is_file()
