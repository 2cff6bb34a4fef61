"""Reading the project's input files (configs, hardware profiles, model cards): UTF-8 text and strict YAML.

Every error is one :class:`~pipeline.core.errors.BatchmarkError` line naming the file (and line).
Below every stage, so that ``config``, ``hardware`` and ``cardregistry`` share it without
importing one another.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from pipeline.core.errors import BatchmarkError


#: Largest input file read as text (configs, hardware profiles, model cards), bytes: 16 MiB.  The
#: project's own are a few kB; a bigger file is refused before it is read.
MAX_TEXT_BYTES = 16 * 2**20

#: Most YAML nodes that aliases (``*name``, ``<<: *name``) may add to a document when expanded:
#: a "billion laughs" alias bomb of a few hundred bytes expands to 10^9 nodes, which every later
#: reader (validation, the config digest, a NaN check) walks.  Aliases that repeat a block a few
#: times stay far below this.
MAX_ALIAS_EXPANSION = 100_000

#: Most scalar characters that aliases may add to a document when expanded: the text of the largest file read
#: (:data:`MAX_TEXT_BYTES`).  A 4 MiB string aliased 50,000 times is 50,000 nodes (under the node limit) but
#: 200 GiB of text to whatever copies it (validation, the config digest, ``run.json``); no document without
#: aliases can hold more than its file.
MAX_ALIAS_CHARS = MAX_TEXT_BYTES


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    return []


def alias_expansion(root: yaml.Node) -> int:
    """How many nodes a composed YAML document gains when its aliases are expanded (0 without aliases).

    Returns expanded − distinct nodes (:func:`expanded_size`).

    Raises:
        yaml.composer.ComposerError: an alias inside the node it names (a recursive document).
    """
    return expanded_size(root)[0]


def expanded_size(root: yaml.Node) -> tuple[int, int]:
    """What a composed YAML document's aliases add when expanded: (nodes gained, scalar characters gained).

    Nodes an alias points to are shared in the composed graph; the expanded size of a node is
    1 + the expanded sizes of its children (and its scalar characters, the characters of its own value plus its
    children's), computed once per distinct node (linear time, however large the expansion).  Returns expanded −
    distinct for both: a 4 MiB string aliased 50,000 times adds 49,999 nodes and 49,999 × 4 Mi characters.

    Raises:
        yaml.composer.ComposerError: an alias inside the node it names (a recursive document).
    """
    size: dict[int, tuple[int, int]] = {}
    distinct_chars = 0
    on_path: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, finished = stack.pop()
        nid = id(node)
        if finished:
            own = len(node.value) if isinstance(node, yaml.ScalarNode) else 0
            kids = [size[id(c)] for c in _children(node)]
            size[nid] = (1 + sum(n for n, _ in kids), own + sum(c for _, c in kids))
            distinct_chars += own
            on_path.discard(nid)
            continue
        if nid in size:
            continue
        if nid in on_path:
            raise yaml.composer.ComposerError(None, None, "an alias refers to the node that contains it "
                                                          "(a recursive document)", node.start_mark)
        on_path.add(nid)
        stack.append((node, True))
        stack.extend((c, False) for c in _children(node) if id(c) not in size)
    nodes, chars = size[id(root)]
    return nodes - len(size), chars - distinct_chars


class UniqueKeyLoader(yaml.SafeLoader):
    """YAML's safe loader, except that a key given twice in one mapping is an error naming both lines,
    and aliases may not expand a document by more than :data:`MAX_ALIAS_EXPANSION` nodes nor
    :data:`MAX_ALIAS_CHARS` characters of scalar text.

    (Plain ``yaml.safe_load`` keeps the last value silently, so a config could measure
    something other than what its reader sees first; and it reads an alias bomb, whose
    expansion then hangs whatever walks the result.)
    """

    def compose_document(self) -> yaml.Node:
        """The document's root node, refused when its aliases expand it too far (:func:`alias_expansion`)."""
        aliases = getattr(self, "_aliases_seen", 0)
        root = super().compose_document()
        if getattr(self, "_aliases_seen", 0) > aliases:
            extra, chars = expanded_size(root)
            if extra > MAX_ALIAS_EXPANSION:
                raise yaml.composer.ComposerError(
                    None, None, f"aliases expand the document by {extra:,} nodes, more than the "
                                f"{MAX_ALIAS_EXPANSION:,} allowed (an alias bomb?)", root.start_mark)
            if chars > MAX_ALIAS_CHARS:
                raise yaml.composer.ComposerError(
                    None, None, f"aliases expand the document by {chars:,} characters of text, more than the "
                                f"{MAX_ALIAS_CHARS:,} allowed (an alias bomb?)", root.start_mark)
        return root

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node:
        if self.check_event(yaml.AliasEvent):
            self._aliases_seen = getattr(self, "_aliases_seen", 0) + 1
        return super().compose_node(parent, index)

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


def lone_surrogate(data: Any) -> str | None:
    """The first string (value or key) of a parsed document that holds a lone surrogate (YAML's or JSON's
    ``"\\ud800"``), else None: no file, page, terminal or request body can carry it as UTF-8."""
    stack = [data]
    while stack:
        o = stack.pop()
        if isinstance(o, str):
            try:
                o.encode("utf-8")
            except UnicodeEncodeError:
                return o
        elif isinstance(o, dict):
            stack.extend(o.keys())
            stack.extend(o.values())
        elif isinstance(o, list):
            stack.extend(o)
    return None


def _check_unicode(path: Path | str, data: Any) -> None:
    """Refuse a document holding a lone surrogate (:func:`lone_surrogate`), naming the file and the string."""
    bad = lone_surrogate(data)
    if bad is not None:
        raise BatchmarkError(f"{path}: {bad!r:.60} is not Unicode text (a lone surrogate escape)")


def load_yaml_text(path: Path | str, text: str) -> Any:
    """Parse YAML text with :class:`UniqueKeyLoader`.

    Raises:
        BatchmarkError: not YAML, a duplicate key, aliases that expand too far (:data:`MAX_ALIAS_EXPANSION`,
            :data:`MAX_ALIAS_CHARS`)
            or refer to themselves, or nested too deeply (one line naming the file and line).
    """
    try:
        data = yaml.load(text, Loader=UniqueKeyLoader)  # noqa: S506 - a SafeLoader subclass
        if "\\u" in text or "\\U" in text:  # only an escape makes a string that is not Unicode text
            _check_unicode(path, data)
        return data
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark else ""
        problem = " ".join(str(getattr(exc, "problem", None) or exc).split())
        raise BatchmarkError(f"{path}:{where} not valid YAML ({problem})") from None
    except RecursionError:
        raise BatchmarkError(f"{path}: not valid YAML (nested too deeply)") from None


def check_size(path: Path | str, limit_bytes: int, what: str) -> None:
    """Refuse a file larger than ``limit_bytes`` before reading it (one line naming the file, its size and the limit).

    A missing or unreadable file passes: its reader says why.

    Raises:
        BatchmarkError: the file is larger than ``limit_bytes``.
    """
    try:
        size = Path(path).stat().st_size
    except OSError:
        return
    if size > limit_bytes:
        raise BatchmarkError(f"{path}: {size / 2**20:,.1f} MiB, larger than the {limit_bytes / 2**20:g} MiB "
                             f"batchmark reads as a {what}")


def read_limited(path: Path | str, limit_bytes: int, what: str) -> bytes:
    """A file's bytes, at most ``limit_bytes``: refused by its size first (:func:`check_size`), and read with a
    bound, so that a device or pipe that never ends (``/dev/zero``) is refused too instead of filling memory.

    Raises:
        BatchmarkError: more than ``limit_bytes``.
        OSError: missing, a folder, unreadable (the caller names the file).
    """
    check_size(path, limit_bytes, what)
    with open(path, "rb") as fh:
        data = fh.read(limit_bytes + 1)
    if len(data) > limit_bytes:
        raise BatchmarkError(f"{path}: more than the {limit_bytes / 2**20:g} MiB batchmark reads as a {what}")
    return data


def read_text_file(path: Path, what: str) -> str:
    """A UTF-8 text file's content (at most :data:`MAX_TEXT_BYTES`).

    Raises:
        BatchmarkError: missing, unreadable, too large, or not UTF-8 text (binary garbage), naming the file.
    """
    try:
        return read_limited(path, MAX_TEXT_BYTES, what).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BatchmarkError(f"{path}: not a UTF-8 text file (byte {exc.start}); expected a {what}") from None
    except OSError as exc:
        raise BatchmarkError(f"{path}: cannot read {what} ({exc.strerror})") from None
