"""tests/conformance/conformance.py: the Go test-case parser, the crediting of collected
tests (markers and parametrize ids) and the collection plugin on small samples; and
docs/conformance.md against the generator's output on the real Go sources and tests."""

from __future__ import annotations

import difflib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

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


def cases() -> list[object]:
    return cf.parse_go_tests(GO, "x_test.go")


def test_markers_and_parametrize_ids_credit_cases() -> None:
    tests = [
        cf.CollectedTest("t.py::test_a", ("TestMapTable/first case", "TestPlain")),
        cf.CollectedTest("t.py::test_b[TestSliceTable/alpha]", (), "TestSliceTable/alpha"),
        # Blank runs compare as one blank, as in the Go names written across lines.
        cf.CollectedTest("t.py::test_c", ("TestMapTable/second  case,\n joined",)),
        # An id that names no Go test is an ordinary id: it credits nothing, and is no error.
        cf.CollectedTest("t.py::test_d[raw key]", (), "raw key"),
        cf.CollectedTest("t.py::test_e[x]", ("TestSliceTable/beta {with braces}",), "x"),
        cf.CollectedTest("t.py::test_f", ("TestPlain",)),
    ]
    credits = cf.credit_tests(cases(), tests)
    assert credits.ported == {
        "TestMapTable/first case": ["t.py::test_a"],
        "TestPlain": ["t.py::test_a", "t.py::test_f"],
        "TestSliceTable/alpha": ["t.py::test_b[TestSliceTable/alpha]"],
        "TestMapTable/second case, joined": ["t.py::test_c"],
        "TestSliceTable/beta {with braces}": ["t.py::test_e[x]"],
    }
    assert credits.unknown == []
    assert credits.on_skipped == {}


def test_unknown_names_and_skipped_tests_credit_nothing() -> None:
    go = '''
func TestDash(t *testing.T) {
	t.Run("a \u2013 b", func(t *testing.T) {})
}
'''
    tests = [
        cf.CollectedTest("t.py::test_a", ("TestMapTable/no such case", "TestNoSuchTest/x")),
        cf.CollectedTest("t.py::test_b[TestSliceTable/gamma]", (), "TestSliceTable/gamma"),
        cf.CollectedTest("t.py::test_c", ("TestPlain",), skipped=True),
        # pytest writes a non-ASCII id character as \\uXXXX.
        cf.CollectedTest("t.py::test_d[TestDash/a \\u2013 b]", (), "TestDash/a \\u2013 b"),
    ]
    credits = cf.credit_tests([*cases(), *cf.parse_go_tests(go, "d_test.go")], tests)
    assert credits.ported == {"TestDash/a \u2013 b": ["t.py::test_d[TestDash/a \\u2013 b]"]}
    assert credits.unknown == [
        "t.py::test_a: kueue_case('TestMapTable/no such case')",
        "t.py::test_a: kueue_case('TestNoSuchTest/x')",
        "t.py::test_b[TestSliceTable/gamma]: parametrize id 'TestSliceTable/gamma'",
    ]
    assert credits.on_skipped == {"TestPlain": ["t.py::test_c"]}


def test_report_counts_ported_not_ported_and_unaccounted() -> None:
    tests = [cf.CollectedTest("tests/unit/t.py::test_a", (
        "TestMapTable/first case", "TestMapTable/second case, joined", "TestMapTable/raw key",
        "TestSliceTable/alpha", "TestSliceTable/beta {with braces}", "TestPlain",
        "TestLiteralSubtests/inline"))]
    listed = [cf.NotPorted("TestLiteralSubtests", (), "no reason needed here"),
              cf.NotPorted("TestMapTable", ("no such case",), "stale")]
    report = cf.build_report(cases(), tests, listed)
    [row] = report.rows
    assert (row.cases, row.ported, row.not_ported) == (10, 7, 2)
    assert row.unaccounted == ["TestLoopWithoutSubtests"]
    assert report.stale == ["TestMapTable/no such case"]
    assert report.conflicts == ["TestLiteralSubtests/inline"]
    assert report.problems == [
        "not_ported.toml names an unknown case: TestMapTable/no such case",
        "ported but also listed in not_ported.toml: TestLiteralSubtests/inline"]
    assert report.files == {"x_test.go": {"tests/unit/t.py": 7}}
    text = cf.format_text(report, show_unaccounted=True)
    assert "unaccounted: x_test.go: TestLoopWithoutSubtests" in text
    md = cf.format_markdown(report, "v0")
    assert "| `x_test.go` | 10 | 7 | 2 | 1 |" in md
    assert "| `x_test.go` | `tests/unit/t.py` (7) |" in md
    assert "| `TestLiteralSubtests/standalone` | no reason needed here |" in md
    assert "- `TestLoopWithoutSubtests`" in md


SAMPLE = '''
import sys

import pytest


@pytest.mark.kueue_case("TestA/one", "TestA/two")
def test_marked():
    assert True


@pytest.mark.parametrize("v", [
    pytest.param(1, id="TestB/x"),
    pytest.param(2, marks=pytest.mark.kueue_case("TestB/y")),
])
def test_params(v):
    assert v


@pytest.mark.kueue_case("TestC/skip")
@pytest.mark.skip(reason="never runs")
def test_skip():
    assert True


@pytest.mark.kueue_case("TestC/skipif")
@pytest.mark.skipif(sys.platform != "no-such-platform", reason="never runs here")
def test_skipif():
    assert True


@pytest.mark.kueue_case("TestC/runs")
@pytest.mark.skipif(sys.platform == "no-such-platform", reason="runs here")
def test_skipif_false():
    assert True


@pytest.mark.kueue_case("TestC/xfail")
@pytest.mark.xfail(reason="may fail")
def test_xfail():
    assert True


class TestGroup:
    pytestmark = pytest.mark.kueue_case("TestD/class")

    def test_in_class(self):
        assert True
'''


def test_collection_records_markers_ids_and_skips(tmp_path: Path) -> None:
    """The plugin, through a real ``pytest --collect-only`` of a sample test file."""
    (tmp_path / "test_sample.py").write_text(SAMPLE, encoding="utf-8")
    got = {t.nodeid.rpartition("test_sample.py::")[2]: (t.cases, t.param_id, t.skipped)
           for t in cf.collected_tests([str(tmp_path)])}
    assert got == {
        "test_marked": (("TestA/one", "TestA/two"), None, False),
        "test_params[TestB/x]": ((), "TestB/x", False),
        "test_params[2]": (("TestB/y",), "2", False),
        "test_skip": (("TestC/skip",), None, True),
        "test_skipif": (("TestC/skipif",), None, True),
        "test_skipif_false": (("TestC/runs",), None, False),
        "test_xfail": (("TestC/xfail",), None, True),
        "TestGroup::test_in_class": (("TestD/class",), None, False),
    }


def test_docs_conformance_md_is_what_the_generator_writes() -> None:
    """docs/conformance.md is exactly what ``conformance.py --write`` writes from this checkout.

    The generator reads the Go sources of the Kueue module pinned in tests/cluster/kueue
    (``go mod download`` fetches them into Go's module cache when they are not there: the
    Go toolchain is needed, as for the local control plane; without it this test fails and
    says so) and collects tests/unit in a subprocess.
    """
    report, version = cf.generate()
    assert report.problems == []
    assert report.total.unaccounted == [], (
        "Go cases neither ported (a kueue_case marker or a parametrize id on a test that "
        "asserts them) nor listed with a reason in tests/conformance/not_ported.toml")
    want = cf.format_markdown(report, version)
    got = cf.DOC.read_text(encoding="utf-8")
    if got != want:
        diff = "".join(difflib.unified_diff(got.splitlines(keepends=True),
                                            want.splitlines(keepends=True),
                                            "docs/conformance.md", "generated"))
        pytest.fail("docs/conformance.md differs from the generator's output; run "
                    f"`{cf.COMMAND}`:\n{diff}", pytrace=False)
