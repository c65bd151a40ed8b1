"""What ExecutionProvider.__init__ gives an instance, and a subclass's own names."""

from __future__ import annotations

import warnings
from typing import ClassVar

import pytest

import ep_sdk
from ep_sdk import ExecutionProvider, SessionConfig


class Plain(ExecutionProvider):
    name = "PlainExecutionProvider"
    default_options: ClassVar[dict[str, str]] = {"flavour": "a"}


def test_options_and_config_are_the_namespaced_slots() -> None:
    config = SessionConfig(intra_op_num_threads=3)
    p = Plain({"flavour": 2}, config)
    assert p.provider_options == {"flavour": "2"}
    assert p.options is p.provider_options  # the 1.1 name reads the same dict
    assert p.session_config is config and p.config is config
    assert Plain().provider_options == {"flavour": "a"}
    assert isinstance(Plain().session_config, SessionConfig)


def test_assigning_the_11_names_still_works() -> None:
    p = Plain()
    p.options = {"flavour": "b"}
    config = SessionConfig(intra_op_num_threads=5)
    p.config = config
    assert p.provider_options == {"flavour": "b"} and p.session_config is config


def test_a_subclass_attribute_named_config_is_kept_and_the_author_told() -> None:
    with pytest.warns(UserWarning, match=r"Mine.*defines its own 'config'.*session_config"):

        class Mine(ep_sdk.BridgeExecutionProvider):
            name = "MineExecutionProvider"
            config: ClassVar[dict[str, int]] = {"engine_level": 3}

    cfg = SessionConfig(cache_dir="/nowhere")
    p = Mine(None, cfg)
    assert p.config == {"engine_level": 3}  # its own, not replaced
    assert p.session_config is cfg  # the SDK's view is intact
    assert p.min_size == 1 and p._query_file("k") is not None


def test_options_as_a_subclass_method_warns_too() -> None:
    with pytest.warns(UserWarning, match="'options'"):

        class WithOptions(ExecutionProvider):
            name = "WithOptionsExecutionProvider"

            def options(self) -> str:  # type: ignore[override]
                return "mine"

    assert WithOptions().options() == "mine"
    assert WithOptions().provider_options == {}


@pytest.mark.parametrize("reserved", ["provider_options", "session_config"])
def test_the_new_names_are_reserved(reserved: str) -> None:
    with pytest.raises(TypeError, match=f"defines {reserved}.*reserves"):
        type("Clash", (ExecutionProvider,), {"name": "ClashExecutionProvider", reserved: 1})


def test_a_plain_subclass_warns_nothing() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")

        class Quiet(ExecutionProvider):
            name = "QuietExecutionProvider"

    assert Quiet().options == {}
