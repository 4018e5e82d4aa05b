"""planner.files: every input limit is checked before the work it guards, and refusals are one line."""

from __future__ import annotations

import os

import pytest

from planner.files import (
    MAX_ALIAS_NODES, MAX_INPUT_BYTES, MAX_YAML_DEPTH, MAX_YAML_NODES, InputFileError, parse_yaml, read_document,
)
from planner.messages import MAX_ECHO_CHARS, excerpt

# 9 levels of 9 aliases each: 9**9 (387 million) strings once expanded, in a few hundred bytes
ALIAS_BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{n}: &{n} [{', '.join([f'*{p}'] * 9)}]\n" for p, n in zip("abcdefgh", "bcdefghi"))


def refused(text: str) -> str:
    with pytest.raises(InputFileError) as info:
        parse_yaml(text, "input.yaml")
    message = str(info.value)
    assert message.startswith("input.yaml: ") and "\n" not in message
    return message


def test_the_alias_bomb_is_refused_while_composing():
    assert len(ALIAS_BOMB) < 500
    assert f"aliases expand to more than {MAX_ALIAS_NODES:,} values" in refused(ALIAS_BOMB)


def test_aliases_within_the_budget_and_merge_keys_still_work():
    doc = parse_yaml("slo: &slo {ttft_ms: 1000, tpot_ms: 50}\nfast:\n  <<: *slo\n  tpot_ms: 20\nsame: *slo\n", "f")
    assert doc == {"slo": {"ttft_ms": 1000, "tpot_ms": 50}, "fast": {"ttft_ms": 1000, "tpot_ms": 20},
                   "same": {"ttft_ms": 1000, "tpot_ms": 50}}


def test_a_recursive_alias_is_refused():
    assert "alias *a refers to a node that contains it" in refused("a: &a [1, *a]\n")


def test_deep_nesting_is_refused_without_recursion_error():
    assert parse_yaml("[" * MAX_YAML_DEPTH + "]" * MAX_YAML_DEPTH, "f") is not None
    assert f"nested deeper than {MAX_YAML_DEPTH} levels" in refused("[" * 100_000 + "]" * 100_000)
    assert "line 1, column 33" in refused("[" * (MAX_YAML_DEPTH + 1) + "]" * (MAX_YAML_DEPTH + 1))


def test_depth_counts_what_aliases_bring_in():
    inner = "[" * (MAX_YAML_DEPTH - 1) + "]" * (MAX_YAML_DEPTH - 1)
    assert "aliases expanded" in refused(f"a: &a {inner}\nb: [*a]\n")


def test_more_values_than_allowed_are_refused():
    assert f"more than {MAX_YAML_NODES:,} values" in refused("[" + ",".join(["1"] * MAX_YAML_NODES) + "]")


def test_duplicate_keys_are_refused_with_their_line():
    message = refused("model: a\nclasses: []\nmodel: b\n")
    assert "line 3" in message and "duplicate key 'model'" in message


def test_yaml_errors_name_the_file_and_position_in_one_line():
    message = refused("a: [1, 2\nb: 3\n")
    assert "not valid YAML/JSON at line" in message and "<unicode string>" not in message


@pytest.mark.parametrize("special", ["/dev/zero", "/dev/full", "/proc"])
def test_non_regular_files_are_refused_before_reading(special):
    with pytest.raises(InputFileError, match=f"^{special}: not a regular file$"):
        read_document(special)


def test_a_fifo_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "pipe.yaml"
    os.mkfifo(fifo)
    with pytest.raises(InputFileError, match="not a regular file"):
        read_document(fifo)


def test_size_is_checked_before_parsing(tmp_path):
    big = tmp_path / "big.yaml"
    big.write_text("a: " + "x" * MAX_INPUT_BYTES)
    with pytest.raises(InputFileError, match=f"more than the {MAX_INPUT_BYTES:,} allowed"):
        read_document(big)


def test_non_utf8_is_one_line_naming_the_byte(tmp_path):
    path = tmp_path / "latin1.yaml"
    path.write_bytes("model: caf\xe9\n".encode("latin-1"))
    with pytest.raises(InputFileError, match=r"latin1.yaml: not UTF-8 text \(byte 0xe9 at offset 10\)"):
        read_document(path)


def test_control_characters_are_one_line():
    assert "unacceptable character #x0000" in refused("a: \x00\n")


def test_excerpt_cuts_long_values():
    assert excerpt("short") == "'short'"
    long = excerpt("x" * 50_000)
    assert len(long) < MAX_ECHO_CHARS + 40 and long.endswith("(49,802 more characters)")


def test_the_shipped_catalog_parses_alike_trusted_and_bounded_and_untrusted_files_stay_bounded(tmp_path):
    """The catalog's own files go through libyaml (``trusted``) to the same documents, duplicate keys still refused
    with their line; a copy of them elsewhere (a user's catalog) is read bounded, so the alias bomb is refused there."""
    import glob

    from planner import catalog as catalog_module
    from planner.catalog import DEFAULT_CATALOG_DIR

    for path in sorted(glob.glob(str(DEFAULT_CATALOG_DIR / "**" / "*.yaml"), recursive=True)):
        assert read_document(path, trusted=True) == read_document(path)
    with pytest.raises(InputFileError, match=r"input.yaml: .* at line 2, column 1: duplicate key 'a'"):
        parse_yaml("a: 1\na: 2\n", "input.yaml", trusted=True)
    bomb = tmp_path / "hardware.yaml"
    bomb.write_text(ALIAS_BOMB)
    with pytest.raises(catalog_module.CatalogError, match="aliases expand"):
        catalog_module._read_yaml(bomb)


def test_the_catalog_reads_its_shipped_files_trusted(monkeypatch):
    """``catalog._read_yaml`` asks for the trusted (libyaml) parse exactly for files under the shipped catalog."""
    from planner import catalog as catalog_module
    from planner.catalog import DEFAULT_CATALOG_DIR

    asked = []
    monkeypatch.setattr(catalog_module, "read_document", lambda path, trusted=False: asked.append(trusted) or {})
    catalog_module._read_yaml(DEFAULT_CATALOG_DIR / "hardware" / "nvidia.yaml")
    catalog_module._read_yaml(DEFAULT_CATALOG_DIR.parent / "examples" / "workloads" / "chat-70b.yaml")
    assert asked == [True, False]
