"""field.Path / field.Error / ErrorList rendering, identical to apimachinery's."""

from __future__ import annotations

import pytest

from jobframework.field import (
    OMIT_VALUE,
    AggregateError,
    ErrorList,
    ErrorType,
    duplicate,
    forbidden,
    go_quote,
    internal_error,
    invalid,
    new_path,
    not_supported,
    required,
    too_long,
    too_many,
    validate_immutable_field,
)

LABELS = new_path("metadata", "labels")


def test_path_rendering() -> None:
    assert str(LABELS.key("kueue.x-k8s.io/queue-name")) == (
        "metadata.labels[kueue.x-k8s.io/queue-name]")
    assert str(new_path("spec").child("template", "spec").child("containers").index_(0)
               .child("resources", "requests")) == (
        "spec.template.spec.containers[0].resources.requests")
    assert str(new_path("spec").index_(2).index_(3)) == "spec[2][3]"
    assert str(LABELS.key("a").root()) == "metadata"


@pytest.mark.parametrize(
    ("err", "text"),
    [
        (invalid(LABELS.key("kueue.x-k8s.io/queue-name"), "a_b", "bad"),
         'metadata.labels[kueue.x-k8s.io/queue-name]: Invalid value: "a_b": bad'),
        (invalid("f", 0, "should be greater than 0"),
         "f: Invalid value: 0: should be greater than 0"),
        (invalid("f", False, "field is immutable"), "f: Invalid value: false: field is immutable"),
        (invalid("f", 1.5, "d"), "f: Invalid value: 1.5: d"),
        (invalid("f", 2.0, "d"), "f: Invalid value: 2: d"),
        (invalid("f", OMIT_VALUE, "custom"), "f: Invalid value: custom"),
        (invalid("f", None, "d"), "f: Invalid value: null: d"),
        (invalid("f", {"b": 1, "a": ["<x>"]}, "d"),
         'f: Invalid value: {"a":["\\u003cx\\u003e"],"b":1}: d'),
        (invalid("f", "", ""), 'f: Invalid value: ""'),
        (forbidden("f", "Is not supported"), "f: Forbidden: Is not supported"),
        (required("f", "must be set"), "f: Required value: must be set"),
        (required("f"), "f: Required value"),
        (duplicate("f[1].topology", "zone (also at index 0)"),
         'f[1].topology: Duplicate value: "zone (also at index 0)"'),
        (not_supported("f", "x", ["a", "b"]),
         'f: Unsupported value: "x": supported values: "a", "b"'),
        (too_long("f", "ignored", 63), "f: Too long: may not be more than 63 bytes"),
        (too_long("f", "ignored", 1), "f: Too long: may not be more than 1 byte"),
        (too_many("f", 20, 18), "f: Too many: 20: must have at most 18 items"),
        (internal_error("f", RuntimeError("boom")), "f: Internal error: boom"),
    ],
)
def test_error_rendering(err: Exception, text: str) -> None:
    assert str(err) == text


def test_go_quote_escapes() -> None:
    assert go_quote('a"b\\c\n\t\x00é') == '"a\\"b\\\\c\\n\\t\\x00é"'


def test_aggregate() -> None:
    assert ErrorList().to_aggregate() is None
    one = ErrorList([forbidden("a", "x")])
    agg = one.to_aggregate()
    assert isinstance(agg, AggregateError)
    assert str(agg) == "a: Forbidden: x"
    two = ErrorList([forbidden("a", "x"), forbidden("a", "x"), required("b", "y")])
    agg2 = two.to_aggregate()
    assert agg2 is not None
    assert str(agg2) == "[a: Forbidden: x, b: Required value: y]"
    assert len(agg2.errors) == 2


def test_immutable_and_causes() -> None:
    errs = validate_immutable_field("new", "old", LABELS.key("q"))
    assert [str(e) for e in errs] == [
        'metadata.labels[q]: Invalid value: "new": field is immutable']
    assert validate_immutable_field("same", "same", "x") == []
    assert errs.to_causes() == [{"reason": "FieldValueInvalid",
                                 "message": 'Invalid value: "new": field is immutable',
                                 "field": "metadata.labels[q]"}]
    assert errs[0].type is ErrorType.INVALID
