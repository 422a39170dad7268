"""Model files checked without loading them: a safetensors header against its file, a GGUF file's header."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from storyjudge.core import models
from storyjudge.core.context import ConfigError
from storyjudge.core.embeddings import check_embedder, safetensors_parameters


def _safetensors(path: Path, shapes: dict[str, list[int]], cut: int = 0) -> Path:
    """A float32 safetensors file with zeroed tensors of these shapes, ``cut`` bytes short of whole."""
    header: dict[str, object] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, shape in shapes.items():
        size = 4
        for dim in shape:
            size *= dim
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    raw = json.dumps(header).encode()
    data = struct.pack("<Q", len(raw)) + raw + bytes(offset)
    path.write_bytes(data[: len(data) - cut] if cut else data)
    return path


def test_parameters_are_counted_from_the_header(tmp_path: Path) -> None:
    path = _safetensors(tmp_path / "model.safetensors", {"a": [3, 4], "b": [5]})
    assert safetensors_parameters(path) == 17


def test_a_truncated_weights_file_is_named(tmp_path: Path) -> None:
    path = _safetensors(tmp_path / "model.safetensors", {"a": [3, 4]}, cut=4)
    with pytest.raises(ConfigError, match="header describes"):
        safetensors_parameters(path)


def test_a_file_that_is_not_safetensors_is_named(tmp_path: Path) -> None:
    path = tmp_path / "model.safetensors"
    path.write_bytes(b"<html>404 Not Found</html>")
    with pytest.raises(ConfigError, match="not a readable safetensors file"):
        safetensors_parameters(path)


def test_the_default_embedder_files_check_out() -> None:
    assert check_embedder("minilm").startswith("6 layers x 384, 22.7 M parameters")


def test_an_embedder_folder_that_is_missing_fails_with_advice(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="nothing is downloaded"):
        check_embedder(f"bge-m3:{tmp_path / 'absent'}")


def test_a_gguf_file_with_a_foreign_header_is_named(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    bogus = tmp_path / "model.gguf"
    bogus.write_bytes(b"PK\x03\x04" + bytes(40))
    monkeypatch.setattr(models, "local_model_path", lambda name: bogus)
    with pytest.raises(ConfigError, match="not a GGUF file"):
        models.check_local_model("smollm2")


def test_the_shipped_gguf_header_checks_out() -> None:
    assert "GGUF v3" in models.check_local_model("smollm2")
