"""Reading the project's input files (configs, hardware profiles, model cards): UTF-8 text and strict YAML.

Every error is one :class:`~pipeline.errors.BatchmarkError` line naming the file (and line).
Below every stage, so that ``config``, ``hardware`` and ``modelcards`` share it without
importing one another.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from pipeline.errors import BatchmarkError


class UniqueKeyLoader(yaml.SafeLoader):
    """YAML's safe loader, except that a key given twice in one mapping is an error naming both lines.

    (Plain ``yaml.safe_load`` keeps the last value silently, so a config could measure
    something other than what its reader sees first.)
    """

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            try:
                hash(key)
            except TypeError:
                raise yaml.constructor.ConstructorError(None, None, "unhashable key", key_node.start_mark) from None
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r} (first at line {seen[key] + 1})", key_node.start_mark)
            seen[key] = key_node.start_mark.line
        return super().construct_mapping(node, deep=deep)


def load_yaml_text(path: Path | str, text: str) -> Any:
    """Parse YAML text with :class:`UniqueKeyLoader`.

    Raises:
        BatchmarkError: not YAML, a duplicate key, or nested too deeply (one line naming the file and line).
    """
    try:
        return yaml.load(text, Loader=UniqueKeyLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark else ""
        problem = " ".join(str(getattr(exc, "problem", None) or exc).split())
        raise BatchmarkError(f"{path}:{where} not valid YAML ({problem})") from None
    except RecursionError:
        raise BatchmarkError(f"{path}: not valid YAML (nested too deeply)") from None


def read_text_file(path: Path, what: str) -> str:
    """A UTF-8 text file's content.

    Raises:
        BatchmarkError: missing, unreadable, or not UTF-8 text (binary garbage), naming the file.
    """
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise BatchmarkError(f"{path}: not a UTF-8 text file (byte {exc.start}); expected a {what}") from None
    except OSError as exc:
        raise BatchmarkError(f"{path}: cannot read {what} ({exc.strerror})") from None
