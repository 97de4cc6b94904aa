"""The recipes for configuring from an app's own settings (docs/settings.md): pydantic-settings and
Starlette's Config.

The recipes are read from that page and run as written, with its ``.env`` in ``tmp_path``; the settings
class the other tests use is the page's own. Each bad value is shown to stop the app's start-up naming the
field. What pydantic reports, and where, is pinned here as the page says it.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.config import Config

from sse_middleware import ConfigError, StreamingMiddleware, StreamingSettings

PAGE = Path(__file__).resolve().parents[2] / "docs" / "settings.md"
SECTION = "## Configuring from your app's settings"


def _blocks() -> list[tuple[str, str]]:
    """(language, code) of each fenced block in the page's section on an app's own settings."""
    text = PAGE.read_text(encoding="utf-8").split(SECTION, 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```(\w+)\n(.*?)```", text, re.DOTALL)


PYDANTIC_RECIPE, DOTENV, CONFIG_RECIPE = _blocks()


def _run(recipe: tuple[str, str], namespace: dict[str, Any]) -> dict[str, Any]:
    """Runs a python block of the page, as an app module would, with ``namespace`` (an ``app``, and what
    the page's earlier blocks defined) around it."""
    language, code = recipe
    assert language == "python", recipe
    exec(compile(code, str(PAGE), "exec", dont_inherit=True), namespace)  # not this file's __future__
    return namespace


# The page's class, defined as the recipe defines it (the recipe's start-up lines run in the tests below).
_CLASS = PYDANTIC_RECIPE[1].split("\nconfig = ", 1)[0]
AppSettings: Any = _run(("python", _CLASS), {"__name__": "recipe"})["AppSettings"]


@pytest.fixture(autouse=True)
def _no_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the .env each test writes counts, whatever the machine's environment holds."""
    for name in list(os.environ):
        if name.startswith(("APP_", "SSE_MIDDLEWARE_")):
            monkeypatch.delenv(name)


def _dotenv(tmp_path: Path, *lines: str) -> Path:
    path = tmp_path / ".env"
    path.write_text("".join(line + "\n" for line in lines))
    return path


def _added(app: Starlette) -> StreamingSettings:
    """The settings the recipe gave the middleware it added to ``app``."""
    (middleware,) = app.user_middleware
    assert middleware.cls is StreamingMiddleware
    settings = middleware.kwargs["settings"]
    assert isinstance(settings, StreamingSettings)
    return settings


def test_the_pages_recipes_run_as_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    language, dotenv = DOTENV
    assert language == "bash"
    (tmp_path / ".env").write_text(dotenv)  # its comment line is a comment in a .env too
    monkeypatch.chdir(tmp_path)
    pydantic = _run(PYDANTIC_RECIPE, {"__name__": "recipe", "app": Starlette()})
    assert pydantic["config"].database_url == "postgres://db/app"
    expected = StreamingSettings(heartbeat_interval=5, coalesce=False, dialect="anthropic")
    assert _added(pydantic["app"]) == expected
    # Starlette's Config: the same file, with the SSE_MIDDLEWARE_* names from_env reads through it.
    _dotenv(tmp_path, "SSE_MIDDLEWARE_HEARTBEAT_INTERVAL=5", "SSE_MIDDLEWARE_COALESCE=off")
    starlette = _run(CONFIG_RECIPE, {**pydantic, "app": Starlette()})
    assert _added(starlette["app"]) == StreamingSettings(heartbeat_interval=5, coalesce=False)


def test_pydantic_settings_nests_the_streaming_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env_file = _dotenv(
        tmp_path,
        "APP_DATABASE_URL=postgres://db/app",
        "APP_STREAMING__HEARTBEAT_INTERVAL=5",
        "APP_STREAMING__COALESCE=off",
        "APP_STREAMING__DIALECT=anthropic",
        "APP_STREAMING__RESUME_TTL=60",
    )
    monkeypatch.setenv("APP_STREAMING__STALL_TIMEOUT", "30")  # merged, field by field, with the file's
    settings = AppSettings(_env_file=env_file)
    assert settings.streaming == StreamingSettings(
        heartbeat_interval=5, coalesce=False, dialect="anthropic", resume_ttl=60, stall_timeout=30
    )
    monkeypatch.setenv("APP_STREAMING__HEARTBEAT_INTERVAL", "9")  # the environment wins over the file
    monkeypatch.setenv("APP_STREAMING__COALESCE", "f")  # pydantic's own words for a bool
    again = AppSettings(_env_file=env_file)
    assert (again.streaming.heartbeat_interval, again.streaming.coalesce, again.streaming.resume_ttl) == (
        9, False, 60,
    )  # fmt: skip
    for field in ("STALL_TIMEOUT", "HEARTBEAT_INTERVAL", "COALESCE"):
        monkeypatch.delenv(f"APP_STREAMING__{field}")
    assert AppSettings(_env_file=None).streaming == StreamingSettings()  # control
    middleware = StreamingMiddleware(lambda *a: None, settings=settings.streaming)
    assert middleware.settings.heartbeat_interval == 5


@pytest.mark.parametrize(
    ("line", "where", "says"),
    [
        # Our own check, from __post_init__: pydantic reports it on the nested model as a whole.
        ("APP_STREAMING__HEARTBEAT_INTERVAL=-1", ("streaming",), "heartbeat_interval must be a finite"),
        ("APP_STREAMING__RESUME_TTL=0", ("streaming",), "resume_ttl must be > 0"),
        ("APP_STREAMING__JSON_TEXT_FIELD=a.", ("streaming",), "json_text_field must name a JSON field"),
        # What the annotations say, pydantic checks first, on the field itself.
        ("APP_STREAMING__HEARTBEAT_INTERVAL=soon", ("streaming", "heartbeat_interval"), "valid number"),
        ("APP_STREAMING__COALESCE=maybe", ("streaming", "coalesce"), "valid boolean"),
        ("APP_STREAMING__DIALECT=gemini", ("streaming", "dialect"), "Input should be 'auto', 'json'"),
        ("APP_STREAMING__HEARTBEAT_INTERVL=5", ("streaming", "heartbeat_intervl"), "Unexpected keyword"),
    ],
)
def test_a_bad_nested_value_stops_start_up_naming_the_field(
    tmp_path: Path, line: str, where: tuple[str, ...], says: str
) -> None:
    env_file = _dotenv(tmp_path, line)
    with pytest.raises(ValidationError) as info:
        AppSettings(_env_file=env_file)
    (error,) = info.value.errors()
    assert error["loc"] == where and says in error["msg"], error


def test_starlette_config_is_a_source_for_from_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env_file = _dotenv(
        tmp_path, "SSE_MIDDLEWARE_HEARTBEAT_INTERVAL=5", "SSE_MIDDLEWARE_DIALECT=openai", "DATABASE_URL=x"
    )
    monkeypatch.setenv("SSE_MIDDLEWARE_DIALECT", "anthropic")  # the environment wins, as Config reads it
    settings = StreamingSettings.from_env(Config(env_file))
    assert (settings.heartbeat_interval, settings.dialect) == (5, "anthropic")
    # With an env_prefix, Config reads APP_SSE_MIDDLEWARE_*, and names without the prefix are not its own.
    monkeypatch.delenv("SSE_MIDDLEWARE_DIALECT")
    prefixed = _dotenv(tmp_path, "APP_SSE_MIDDLEWARE_HEARTBEAT_INTERVAL=7", "SSE_MIDDLEWARE_UNREAD=maybe")
    settings = StreamingSettings.from_env(Config(prefixed, env_prefix="APP_"))
    assert settings.heartbeat_interval == 7
    misspelt = _dotenv(tmp_path, "APP_SSE_MIDDLEWARE_HEARTBEAT_INTERVL=7")
    with pytest.raises(ConfigError, match=r"setting\(s\) SSE_MIDDLEWARE_HEARTBEAT_INTERVL \(did you mean"):
        StreamingSettings.from_env(Config(misspelt, env_prefix="APP_"))


@pytest.mark.parametrize(
    ("line", "says"),
    [
        ("SSE_MIDDLEWARE_HEARTBEAT_INTERVL=5", "unknown setting(s) SSE_MIDDLEWARE_HEARTBEAT_INTERVL"),
        ("SSE_MIDDLEWARE_HEARTBEAT_INTERVAL=soon", "SSE_MIDDLEWARE_HEARTBEAT_INTERVAL='soon' is not valid"),
        ("SSE_MIDDLEWARE_DIALECT=gemini", "dialect must be one of"),
    ],
)
def test_a_bad_line_in_a_starlette_env_file_is_caught(tmp_path: Path, line: str, says: str) -> None:
    assert not StreamingSettings.from_env(Config(_dotenv(tmp_path, "SSE_MIDDLEWARE_COALESCE=off"))).coalesce
    env_file = _dotenv(tmp_path, "SSE_MIDDLEWARE_COALESCE=off", line)
    with pytest.raises(ConfigError) as info:
        StreamingSettings.from_env(Config(env_file))
    assert says in str(info.value)
