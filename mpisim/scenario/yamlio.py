"""Reading a scenario file's YAML: strict (a key given twice is an error) and bounded.

A scenario is a page of YAML, but YAML can say far more: an alias bomb of 650 bytes expands to
10^10 nodes, a file may nest 100,000 levels deep. :func:`read_yaml` measures the tree before
building it and refuses what exceeds the limits below, with the line where it happens::

    bad.yaml: line 7: invalid YAML: mapping values are not allowed here (column 12)

Nothing here knows what a scenario holds: :mod:`mpisim.scenario.schema` checks that.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path
from typing import Any

import yaml

from mpisim.errors import ConfigError

__all__ = ["MAX_DEPTH", "MAX_FILE_BYTES", "MAX_NODES", "MAX_NUMBER_CHARS", "MAX_TEXT_CHARS", "read_file",
           "read_scenario_file", "read_yaml"]



_SURROGATE = re.compile("[\ud800-\udfff]")


class _StrictLoader(yaml.SafeLoader):
    """PyYAML's safe loader, except that a key given twice in one mapping is an error.

    Plain PyYAML keeps the last value silently, which turns a copy-paste slip into a wrong run.
    Every value is built through :meth:`construct_object`, which also turns what PyYAML's own
    constructors raise on a bad tagged scalar (``!!int 'x1'`` is a ValueError, ``!!timestamp
    'x1'`` an AttributeError) into a YAML error at that node's line, and refuses a string holding
    a lone surrogate (``"\\ud800"``): no UTF-8 file or terminal can hold it, so it would pass
    ``check`` and kill the run when its results are printed.
    """

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        try:
            value = super().construct_object(node, deep=deep)
        except (yaml.YAMLError, ConfigError, RecursionError):
            raise
        except Exception as err:  # any constructor failure is bad input, located here
            why = f" ({err})" if isinstance(err, ValueError) and str(err) else ""
            raise yaml.constructor.ConstructorError(
                None, None, f"{_short(node)} is not a valid !!{node.tag.rpartition(':')[2]}{why}",
                node.start_mark) from None
        if isinstance(value, str) and _SURROGATE.search(value):
            raise yaml.constructor.ConstructorError(
                None, None, "a lone surrogate (such as \\ud800) is not a character: UTF-8 text cannot hold it",
                node.start_mark)
        return value


def _short(node: yaml.Node) -> str:
    text = node.value if isinstance(node.value, str) else "(collection)"
    return repr(text[:40])


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    first_line: dict[Any, int] = {}
    # Checked before merge keys (<<: *base) are flattened in: an explicit key may override one.
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":
            continue
        key = loader.construct_object(key_node, deep=True)
        try:
            if key in first_line:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r} (first given on line {first_line[key] + 1})", key_node.start_mark
                )
            first_line[key] = key_node.start_mark.line
        except TypeError:  # an unhashable key: construct_mapping below reports it
            break
    loader.flatten_mapping(node)
    return loader.construct_mapping(node, deep=True)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def _yaml_error(err: yaml.YAMLError, file: str, text: str = "") -> ConfigError:
    """Turn a YAML error into one line: the line number as the path, then what went wrong."""
    if isinstance(err, yaml.reader.ReaderError):  # a control character such as NUL: no mark, a position
        line = text.count("\n", 0, max(err.position, 0)) + 1
        return ConfigError(f"invalid YAML: character #x{err.character:04x} is not allowed in YAML text "
                           "(a control character)", f"line {line}", file)
    if isinstance(err, yaml.MarkedYAMLError) and err.problem_mark is not None:
        mark = err.problem_mark
        problem = err.problem or err.context or "cannot parse"
        return ConfigError(f"invalid YAML: {problem} (column {mark.column + 1})", f"line {mark.line + 1}", file)
    return ConfigError(f"invalid YAML: {' '.join(str(err).split())}", "", file)


#: Limits on what a scenario file may hold. A scenario is a page of YAML; these are far above
#: any real one and far below what would exhaust the machine (a 650-byte alias bomb expands
#: to 10^10 nodes). The sizes count what the YAML *expands* to, aliases included.
MAX_FILE_BYTES = 1_000_000
MAX_DEPTH = 64
MAX_NODES = 200_000
MAX_TEXT_CHARS = 2_000_000
MAX_NUMBER_CHARS = 100


def _check_limits(root: yaml.Node) -> None:
    """Refuse a YAML tree that is too deep, expands too far, holds an absurdly long number or refers to itself.

    Sizes are counted with every alias expanded, memoised per node, so an alias bomb is
    measured in the time it takes to read, not to expand it. The walk is iterative: a deeply
    nested file must not exhaust Python's stack either.
    """
    expanded: dict[int, tuple[int, int, int]] = {}  # id(node) -> (values, characters, depth) once expanded
    open_nodes: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        line = f"line {node.start_mark.line + 1}"
        if isinstance(node, yaml.ScalarNode):
            if (len(node.value) > MAX_NUMBER_CHARS and node.style is None
                    and node.tag in ("tag:yaml.org,2002:int", "tag:yaml.org,2002:float")):
                raise ConfigError(f"a number of {len(node.value)} characters (at most {MAX_NUMBER_CHARS})", line)
            expanded[id(node)] = (1, len(node.value), 1)
            continue
        children = node.value if isinstance(node, yaml.SequenceNode) else [part for pair in node.value for part in pair]
        if children_done:
            nodes = 1 + sum(expanded[id(child)][0] for child in children)
            chars = sum(expanded[id(child)][1] for child in children)
            depth = 1 + max((expanded[id(child)][2] for child in children), default=0)
            if depth > MAX_DEPTH:
                raise ConfigError(f"invalid YAML: nested more than {MAX_DEPTH} levels deep", line)
            if nodes > MAX_NODES or chars > MAX_TEXT_CHARS:
                raise ConfigError(
                    f"invalid YAML: expands to more than {MAX_NODES:,} values or {MAX_TEXT_CHARS:,} characters "
                    "(aliases repeat what they point to)", line)
            expanded[id(node)] = (nodes, chars, depth)
            open_nodes.discard(id(node))
            continue
        if id(node) in expanded:
            continue
        if id(node) in open_nodes:
            raise ConfigError("invalid YAML: an alias refers to a value that contains it", line)
        open_nodes.add(id(node))
        stack.append((node, True))
        stack.extend((child, False) for child in children if id(child) not in expanded)


def read_yaml(text: str, file: str = "") -> Any:
    """Parse YAML *text*, rejecting duplicate keys and what exceeds the limits above. Raises ConfigError naming the line."""
    try:
        loader = _StrictLoader(text)  # reading a str checks every character first: NUL is refused here
    except yaml.YAMLError as err:
        raise _yaml_error(err, file, text) from None
    try:
        try:
            node = loader.get_single_node()
        except RecursionError:
            raise ConfigError(f"invalid YAML: nested more than {MAX_DEPTH} levels deep", "", file) from None
        if node is None:
            return None
        try:
            _check_limits(node)
        except ConfigError as err:
            raise err.in_file(file) if file else err from None
        return loader.construct_document(node)
    except yaml.YAMLError as err:
        raise _yaml_error(err, file, text) from None
    finally:
        loader.dispose()


def read_file(path: Path, file: str) -> Any:
    try:
        info = path.stat()
        if stat.S_ISDIR(info.st_mode):
            raise ConfigError("is a directory, not a scenario file", "", file)
        if not stat.S_ISREG(info.st_mode):
            raise ConfigError("is not a regular file (a scenario is a YAML file)", "", file)
        if info.st_size > MAX_FILE_BYTES:
            raise ConfigError(f"is {info.st_size:,} bytes; a scenario file may have at most {MAX_FILE_BYTES:,}", "", file)
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError("no such file", "", file) from None
    except IsADirectoryError:
        raise ConfigError("is a directory, not a scenario file", "", file) from None
    except UnicodeDecodeError:
        raise ConfigError("is not UTF-8 text", "", file) from None
    except OSError as err:
        raise ConfigError(f"cannot read: {err.strerror or err}", "", file) from None
    return read_yaml(text, file)


def read_scenario_file(path: str | os.PathLike[str]) -> Any:
    """Return the raw YAML content of a scenario file, unvalidated. Raises ConfigError if unreadable."""
    return read_file(Path(path), os.fspath(path))


