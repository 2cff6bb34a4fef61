"""What the published JSON contracts share: the base of their pydantic models, their JSON Schema (``$id`` and
``version``), and the check of a document against its model.

The contracts are the JSON other tools read: ``show --json`` (:mod:`pipeline.views.showcontract`), ``diff --json``
(:mod:`pipeline.diff.contract`), ``plan --json`` (:mod:`pipeline.plan.contract`) and ``predict --json``
(:mod:`pipeline.views.predictcontract`), each model beside the folder that builds its document.  Their schemas are
committed under ``docs/reference/`` (:func:`pipeline.pages.reference.schema_files`).

Each producer hands its document to :func:`checked` before it returns it; the check runs only where
``BATCHMARK_CHECK_CONTRACTS`` is set (the test suite sets it, ``tests/conftest.py``), so every document a test makes,
in process or through the command line, is validated, and a user's command never fails on its own output.
"""

from __future__ import annotations

import json
import os
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field

#: The environment variable that turns the check on (any non-empty value).
CHECK_ENV = "BATCHMARK_CHECK_CONTRACTS"
#: Where the schemas' ``$id`` points: their file in the repository, relative to its root.
SCHEMA_DIR = "docs/reference"


class Closed(BaseModel):
    """A contract object whose keys are all named: any other key is refused (``additionalProperties: false``)."""

    model_config = ConfigDict(extra="forbid")


class Open(BaseModel):
    """A contract object with named keys and room for more (a block copied from a stored file, whose own schema
    lives with the file)."""

    model_config = ConfigDict(extra="allow")


def field(description: str, unit: str | None = None, **kw: Any) -> Any:
    """A pydantic ``Field`` whose description ends with its unit (``"… (unit: s)"``)."""
    return Field(description=f"{description} (unit: {unit})" if unit else description, **kw)


class RunQuality(Closed):
    """The run's verdict (pipeline.analysis.quality.run_quality), the same on every model."""

    verdict: Literal["clean", "flagged"] = field("clean, or flagged")
    reasons: list[str] = field("why it is flagged")
    noisy_points: list[dict[str, Any]] = field("points whose repeats spread too far: {model, concurrency, spread}")
    busy_points: list[dict[str, Any]] = field("points run under outside load: {model, concurrency, outside_share}")
    points: list[dict[str, Any]] = field("every flagged point's key, verdict and reasons")
    withholds: str | None = field("what the flag takes back of a diff (roofline: MBU, MFU); null otherwise")
    clean_text: str | None = field("the run page's line for a clean run: the checks made and those not possible")
    interference: bool | None = field("the outside load flagged a point")
    probe_drift: float | None = field("the drift of a probe that moved", "fraction")


def schema_name(name: str) -> str:
    """The file name of a contract's schema: ``show`` → ``show.schema.json``."""
    return f"{name}.schema.json"


def json_schema(model: type[BaseModel], name: str, version: int, title: str) -> dict[str, Any]:
    """The JSON Schema (draft 2020-12, as pydantic writes it) of ``model`` with ``$schema``, ``$id`` (its file under
    ``docs/reference/``), ``title`` and ``version`` (the contract's, raised on any change a reader must know of)."""
    body = model.model_json_schema(mode="serialization")
    return {"$schema": "https://json-schema.org/draft/2020-12/schema",
            "$id": f"{SCHEMA_DIR}/{schema_name(name)}", "title": title, "version": version,
            **{k: v for k, v in body.items() if k != "title"}}


ContractModel = TypeVar("ContractModel", bound=BaseModel)


def validate(model: type[ContractModel], doc: Any) -> ContractModel:
    """``doc`` (a producer's dict) checked against ``model`` as a reader sees it: its JSON text, strictly (no string
    read as a number, no number as a bool).

    Raises:
        pydantic.ValidationError: the document breaks the contract (a bug of its producer or of the model).
    """
    return model.model_validate_json(json.dumps(doc), strict=True)


def checked(model: type[BaseModel], doc: Any) -> Any:
    """``doc`` unchanged; validated first against ``model`` (:func:`validate`) where ``BATCHMARK_CHECK_CONTRACTS``
    is set."""
    if os.environ.get(CHECK_ENV):
        validate(model, doc)
    return doc
