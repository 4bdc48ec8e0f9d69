"""The package itself: the stubs list exactly what the native module exports, the
exceptions keep their facts through pickling, and importing cutpoint never imports
LangChain."""

from __future__ import annotations

import ast
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

import cutpoint
from cutpoint import _native
from cutpoint._errors import AppendError, CutpointError, DeferError, EventError, FormatError, ReplaceError


def stub_names() -> set:
    stub = Path(cutpoint.__file__).with_name("_native.pyi")
    tree = ast.parse(stub.read_text(encoding="utf-8"))
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef)):
            names.add(node.name)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names - {"RecordKind", "AnomalyName"}


def test_the_stub_lists_exactly_the_native_exports() -> None:
    exported = {n for n in dir(_native) if not n.startswith("_")} | {"__version__"}
    assert stub_names() == exported


def test_the_stub_lists_every_public_method() -> None:
    stub = Path(cutpoint.__file__).with_name("_native.pyi")
    tree = ast.parse(stub.read_text(encoding="utf-8"))
    for node in tree.body:
        if not isinstance(node, ast.ClassDef):
            continue
        declared = {n.name for n in node.body if isinstance(n, ast.FunctionDef)}
        actual = {n for n in dir(getattr(_native, node.name)) if not n.startswith("_")}
        assert actual == declared - {"__init__", "__len__"}, node.name


@pytest.mark.parametrize(
    "error",
    [
        DeferError("d", reason="no_legal_cut", waiting_on=["a", "b"], floor=3),
        FormatError("f", line=4, detail="bad"),
        AppendError("a", variant="duplicate_call", at=2, call_id="x", first_use=1),
        EventError("e", variant="not_open", event="delta", len=0),
        ReplaceError("r", variant="empty_region", start=2, end=2),
    ],
)
def test_exceptions_keep_their_facts_through_pickling(error: CutpointError) -> None:
    back = pickle.loads(pickle.dumps(error))
    assert type(back) is type(error)
    assert back.facts() == error.facts() and str(back) == str(error)
    assert isinstance(back, CutpointError)


def test_exceptions_refuse_facts_they_do_not_have() -> None:
    with pytest.raises(TypeError, match="has no fact 'colour'"):
        FormatError("f", colour="red")
    assert issubclass(FormatError, ValueError)
    assert not issubclass(DeferError, ValueError)


def test_importing_cutpoint_does_not_import_langchain(tmp_path: Path) -> None:
    code = (
        "import sys, cutpoint; cutpoint.check([], format='openai-chat'); "
        "print(any(m.startswith('langchain') for m in sys.modules))"
    )
    # Run away from python/, where the source folder would shadow the installed package.
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=tmp_path
    )
    assert out.stdout.strip() == "False"


def test_the_strategy_names_are_the_planned_ones() -> None:
    assert cutpoint.STRATEGIES == [
        "clear",
        "clear-thinking",
        "digest",
        "summarize",
        "slide",
        "truncate",
        "pipeline",
    ]
    assert cutpoint.AVAILABLE_STRATEGIES == cutpoint.STRATEGIES
