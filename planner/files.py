"""Reading input files (workloads, studies, catalogs) and writing outputs for the command line.

Every limit is checked before the work it guards: a file's size and kind before it is read, UTF-8
before parsing, and while YAML is composed, its nesting depth, its node count and the nodes its
aliases would add once expanded (a few hundred bytes of nested aliases otherwise expand to
billions of values). A refused file raises InputFileError: one line naming the file and where. The shipped catalog's
own files, part of the code, are parsed by libyaml without the composing limits (``TrustedLoader``).
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import yaml
from yaml.nodes import MappingNode, SequenceNode

from planner.messages import MAX_ECHO_CHARS, excerpt, one_line

#: largest input file read (workload, study, catalog file), in bytes
MAX_INPUT_BYTES = 1_000_000
#: deepest nesting of mappings and lists in a YAML/JSON input (aliases expanded)
MAX_YAML_DEPTH = 32
#: most YAML nodes (scalars, lists, mappings) written in one input file
MAX_YAML_NODES = 100_000
#: most nodes that aliases may add to one input file once expanded
MAX_ALIAS_NODES = 10_000

_MERGE_TAG = "tag:yaml.org,2002:merge"


class InputFileError(ValueError):
    """A file that cannot be read or parsed; the message names the file."""


def read_text(path: str | Path, max_bytes: int = MAX_INPUT_BYTES) -> str:
    """A regular file of at most ``max_bytes`` bytes as UTF-8 text; size and kind checked before reading."""
    path = Path(path)
    try:
        info = os.stat(path)
        if not stat.S_ISREG(info.st_mode):
            raise InputFileError(f"{path}: not a regular file")
        if info.st_size > max_bytes:
            raise InputFileError(f"{path}: {info.st_size:,} bytes, more than the {max_bytes:,} allowed")
        with path.open("rb") as fh:
            data = fh.read(max_bytes + 1)  # a file may grow, or report size 0 (procfs), after stat
    except OSError as exc:
        raise InputFileError(f"{path}: cannot read ({exc.strerror or exc})") from exc
    if len(data) > max_bytes:
        raise InputFileError(f"{path}: more than the {max_bytes:,} bytes allowed")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputFileError(f"{path}: not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start})") from exc


class _Refused(yaml.YAMLError):
    """A YAML document over one of the limits above."""

    def __init__(self, problem: str, mark):
        super().__init__(problem)
        self.problem, self.problem_mark = problem, mark


class _UniqueKeys:
    """Duplicate mapping keys refused (a constructor mixin)."""

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            if key_node.tag == _MERGE_TAG:
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                duplicate = key in seen
                seen.add(key)
            except TypeError:  # an unhashable key: the base constructor says so
                continue
            if duplicate:
                raise yaml.constructor.ConstructorError(None, None, f"duplicate key {excerpt(key)}",
                                                        key_node.start_mark)
        return super().construct_mapping(node, deep)


class BoundedLoader(_UniqueKeys, yaml.SafeLoader):
    """PyYAML's safe loader with the limits above and duplicate mapping keys refused."""

    def __init__(self, stream):
        super().__init__(stream)
        self._depth = 0
        self._nodes = 0
        self._alias_nodes = 0
        self._size: dict[int, int] = {}  # id(node) -> nodes once aliases are expanded
        self._height: dict[int, int] = {}  # id(node) -> nesting levels once aliases are expanded

    def compose_node(self, parent, index):
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent):
            node = super().compose_node(parent, index)
            if id(node) not in self._size:
                raise _Refused(f"alias *{event.anchor} refers to a node that contains it", event.start_mark)
            self._alias_nodes += self._size[id(node)]
            if self._alias_nodes > MAX_ALIAS_NODES:
                raise _Refused(f"aliases expand to more than {MAX_ALIAS_NODES:,} values", event.start_mark)
            if self._depth + self._height[id(node)] > MAX_YAML_DEPTH:
                raise _Refused(f"nested deeper than {MAX_YAML_DEPTH} levels (aliases expanded)", event.start_mark)
            return node
        self._depth += 1
        self._nodes += 1
        if self._depth > MAX_YAML_DEPTH:
            raise _Refused(f"nested deeper than {MAX_YAML_DEPTH} levels", event.start_mark)
        if self._nodes > MAX_YAML_NODES:
            raise _Refused(f"more than {MAX_YAML_NODES:,} values", event.start_mark)
        node = super().compose_node(parent, index)
        self._depth -= 1
        children = _children(node)
        self._size[id(node)] = 1 + sum(self._size[id(c)] for c in children)
        self._height[id(node)] = 1 + max((self._height[id(c)] for c in children), default=0)
        return node


def _children(node) -> list:
    if isinstance(node, SequenceNode):
        return node.value
    if isinstance(node, MappingNode):
        return [n for pair in node.value for n in pair]
    return []


#: the shipped catalog's own files (``trusted``): libyaml's parser, five times faster, with duplicate keys refused but
#: no composing limits (its composer is C); a plan's process reads them every time. PyYAML without libyaml: bounded.
TrustedLoader = type("TrustedLoader", (_UniqueKeys, yaml.CSafeLoader), {}) if yaml.__with_libyaml__ else BoundedLoader


def parse_yaml(text: str, name: str, trusted: bool = False) -> Any:
    """Parse YAML or JSON text (JSON is YAML) with BoundedLoader (``trusted``: files shipped with the code, with
    ``TrustedLoader``); errors are one line naming ``name``."""
    try:
        return yaml.load(text, Loader=TrustedLoader if trusted else BoundedLoader)  # noqa: S506 - both are safe loaders
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise InputFileError(f"{name}: not valid YAML/JSON{where}: {one_line(problem, MAX_ECHO_CHARS)}") from exc


def read_document(path: str | Path, max_bytes: int = MAX_INPUT_BYTES, trusted: bool = False) -> Any:
    """Read and parse a YAML or JSON file within the limits above (``trusted``: see ``parse_yaml``)."""
    return parse_yaml(read_text(path, max_bytes), str(path), trusted)


def write_json(path: str | Path, payload: Any) -> Path:
    """Write ``payload`` as indented JSON, creating parent folders."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=2) + "\n")
    return path
