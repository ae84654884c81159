"""tests/conformance/conformance.py: the Go test-case parser and the Python matcher, on
small snippets (no Go module cache needed)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

SCRIPT = Path(__file__).resolve().parents[1] / "conformance" / "conformance.py"


def load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("conformance_script", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


cf = load()

GO = '''
package x

func helper(t *testing.T) {}

func TestMapTable(t *testing.T) {
	labels := map[string]string{"not": "a case"}
	cases := map[string]struct {
		in   map[string]int
		want bool
	}{
		"first case": {
			in: map[string]int{"nested": 1},
		},
		"second " +
			"case, joined": {want: true},
		// "commented": {},
		`raw key`: {},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) { _ = tc; _ = labels })
	}
}

func TestSliceTable(t *testing.T) {
	testcases := []struct {
		name string
		x    int
	}{
		{
			name: "alpha",
			x:    1,
		},
		{x: 2, name: "beta {with braces}"},
	}
	for _, tc := range testcases {
		t.Run(tc.name, func(t *testing.T) {})
	}
}

func TestPlain(t *testing.T) {
	if got := f(); got != "}" {
		t.Errorf("got %q", got)
	}
}

func TestLiteralSubtests(t *testing.T) {
	for _, tc := range map[string]struct{ v int }{"inline": {v: 1}} {
		t.Run("sub", func(t *testing.T) { _ = tc })
	}
	t.Run("standalone", func(t *testing.T) {})
}

func TestLoopWithoutSubtests(t *testing.T) {
	cases := map[string]struct{ v int }{"ignored": {v: 1}}
	for _, tc := range cases {
		_ = tc
	}
}
'''


def test_parser_finds_map_keys_slice_names_and_plain_tests() -> None:
    got = [(c.test, c.name) for c in cf.parse_go_tests(GO, "x_test.go")]
    assert got == [
        ("TestMapTable", "first case"),
        ("TestMapTable", "second case, joined"),
        ("TestMapTable", "raw key"),
        ("TestSliceTable", "alpha"),
        ("TestSliceTable", "beta {with braces}"),
        ("TestPlain", None),
        ("TestLiteralSubtests", "inline"),
        ("TestLiteralSubtests", "sub"),
        ("TestLiteralSubtests", "standalone"),
        ("TestLoopWithoutSubtests", None),
    ]


def test_parser_records_lines_and_repeated_names() -> None:
    src = '''
func TestDup(t *testing.T) {
	cases := []struct{ name string }{{name: "x"}, {name: "x"}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {})
	}
}
'''
    cases = cf.parse_go_tests(src, "d_test.go")
    assert [c.id for c in cases] == ["TestDup/x", "TestDup/x#01"]
    assert cases[0].line == 3


PY = '''
"""Module docstring naming TestMapTable/"first case", "second case, joined" and
"not a case"."""

import pytest


@pytest.mark.parametrize("v", [pytest.param(1, id="TestSliceTable/alpha")])
def test_ids(v):
    # Ports TestSliceTable/"beta {with
    #   braces}"; TestPlain.
    assert v


def test_other():
    """TestMapTable/raw key, written without quotes."""
    x = "TestSliceTable/alphabet is not a case"
    assert x
'''


def cases() -> list[object]:
    return cf.parse_go_tests(GO, "x_test.go")


def test_matcher_credits_quoted_lists_wrapped_comments_and_plain_names() -> None:
    mentions = cf.python_mentions(PY, "tests/unit/t.py")
    found = cf.match_cases(cases(), mentions)
    assert set(found) == {"TestMapTable/first case", "TestMapTable/second case, joined",
                          "TestMapTable/raw key", "TestSliceTable/alpha",
                          "TestSliceTable/beta {with braces}", "TestPlain"}
    assert found["TestSliceTable/beta {with braces}"] == ["tests/unit/t.py::test_ids"]
    assert found["TestMapTable/raw key"] == ["tests/unit/t.py::test_other"]
    assert found["TestMapTable/first case"] == ["tests/unit/t.py:2"]


def test_matcher_prefers_the_longest_case_name() -> None:
    go = '''
func TestT(t *testing.T) {
	cases := map[string]struct{}{"simple": {}, "simple with more": {}}
	for name := range cases {
		t.Run(name, func(t *testing.T) {})
	}
}
'''
    mention = cf.Mention("test_x[TestT/simple with more]", "id")
    found = cf.match_cases(cf.parse_go_tests(go, "t_test.go"), [mention])
    assert set(found) == {"TestT/simple with more"}


def test_report_counts_ported_not_ported_and_unaccounted() -> None:
    mentions = cf.python_mentions(PY, "tests/unit/t.py")
    listed = [cf.NotPorted("TestLiteralSubtests", (), "no reason needed here"),
              cf.NotPorted("TestMapTable", ("no such case",), "stale")]
    report = cf.build_report(cases(), mentions, listed)
    [row] = report.rows
    assert (row.cases, row.ported, row.not_ported) == (10, 6, 3)
    assert row.unaccounted == ["TestLoopWithoutSubtests"]
    assert report.stale == ["TestMapTable/no such case"]
    text = cf.format_text(report, show_unaccounted=True)
    assert "unaccounted: x_test.go: TestLoopWithoutSubtests" in text
    md = cf.format_markdown(report, "v0", "2026-11-25", "cmd")
    assert "| `x_test.go` | 10 | 6 | 3 | 1 |" in md
