from typing import Any

from ep_sdk import RunContext

def run_steps(loop: tuple[Any, ...], slots: list[Any], ctx: RunContext) -> None: ...
