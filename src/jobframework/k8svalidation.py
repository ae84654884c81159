"""Kubernetes' own name and label checks (apimachinery's ``util/validation``), with its messages.

``is_dns1123_label("a.b") == ["must not contain dots"]``; the ``is_*`` checks return error
strings (empty when valid), :func:`validate_label_name` and :func:`is_domain_prefixed_path`
return a :class:`~jobframework.field.ErrorList`. They know nothing of jobs, so anything
may use them; Kueue's job rules built on them are in :mod:`jobframework.validation`, which
re-exports every public name here.
"""

from __future__ import annotations

import re
from typing import Final

from . import constants as c
from .field import ErrorList, Path, invalid, required

__all__ = [
    "DNS1123_LABEL_MAX_LENGTH",
    "DNS1123_SUBDOMAIN_MAX_LENGTH",
    "is_dns1123_label",
    "is_dns1123_subdomain",
    "is_domain_prefixed_path",
    "is_qualified_name",
    "is_valid_label_value",
    "max_len_error",
    "regex_error",
    "validate_label_name",
]

DNS1123_LABEL_MAX_LENGTH: Final = 63
DNS1123_SUBDOMAIN_MAX_LENGTH: Final = 253
_DNS1123_LABEL_FMT: Final = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN_FMT: Final = _DNS1123_LABEL_FMT + "(\\." + _DNS1123_LABEL_FMT + ")*"
_DNS1123_LABEL_MSG: Final = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
    "and must start and end with an alphanumeric character")
_DNS1123_SUBDOMAIN_MSG: Final = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
    "'-' or '.', and must start and end with an alphanumeric character")
_QUALIFIED_NAME_FMT: Final = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_LABEL_VALUE_MSG: Final = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' "
    "or '.', and must start and end with an alphanumeric character")
_HTTP_PATH_FMT: Final = "[A-Za-z0-9/\\-._~%!$&'()*+,;=:]+"


def regex_error(msg: str, fmt: str, *examples: str) -> str:
    """apimachinery's ``RegexError`` text."""
    if not examples:
        return f"{msg} (regex used for validation is '{fmt}')"
    shown = " or ".join(f"'{e}', " for e in examples)
    return f"{msg} (e.g. {shown}regex used for validation is '{fmt}')"


def max_len_error(length: int) -> str:
    """apimachinery's ``MaxLenError`` text."""
    return f"must be no more than {length} characters"


def _full(fmt: str, value: str) -> bool:
    # Go's ^...$ never matches before a trailing newline, unlike Python's $.
    return re.fullmatch(fmt, value) is not None


def is_dns1123_label(value: str) -> list[str]:
    """``IsDNS1123Label``: error strings, empty when valid."""
    errs: list[str] = []
    if len(value) > DNS1123_LABEL_MAX_LENGTH:
        errs.append(max_len_error(DNS1123_LABEL_MAX_LENGTH))
    if not _full(_DNS1123_LABEL_FMT, value):
        if _full(_DNS1123_SUBDOMAIN_FMT, value):
            errs.append("must not contain dots")
        else:
            errs.append(regex_error(_DNS1123_LABEL_MSG, _DNS1123_LABEL_FMT, "my-name", "123-abc"))
    return errs


def is_dns1123_subdomain(value: str) -> list[str]:
    """``IsDNS1123Subdomain``: error strings, empty when valid."""
    errs: list[str] = []
    if len(value) > DNS1123_SUBDOMAIN_MAX_LENGTH:
        errs.append(max_len_error(DNS1123_SUBDOMAIN_MAX_LENGTH))
    if not _full(_DNS1123_SUBDOMAIN_FMT, value):
        errs.append(regex_error(_DNS1123_SUBDOMAIN_MSG, _DNS1123_SUBDOMAIN_FMT, "example.com"))
    return errs


def is_valid_label_value(value: str) -> list[str]:
    """``IsValidLabelValue``: error strings, empty when valid."""
    errs: list[str] = []
    if len(value) > c.LABEL_VALUE_MAX_LENGTH:
        errs.append(max_len_error(c.LABEL_VALUE_MAX_LENGTH))
    if not _full(f"({_QUALIFIED_NAME_FMT})?", value):
        errs.append(regex_error(_LABEL_VALUE_MSG, f"({_QUALIFIED_NAME_FMT})?",
                                "MyValue", "my_value", "12345"))
    return errs


_LABEL_KEY_MSG: Final = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character")


def is_qualified_name(value: str) -> list[str]:
    """``IsQualifiedName`` / ``content.IsLabelKey``: an optionally prefixed label key."""
    errs: list[str] = []
    examples = ("MyName", "my.name", "123-abc")
    prefix, slash, name = value.partition("/")
    if not slash:
        name = value
    elif "/" in name:
        return [f"a valid label key {regex_error(_LABEL_KEY_MSG, _QUALIFIED_NAME_FMT, *examples)}"
                " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"]
    elif not prefix:
        errs.append("prefix part must be non-empty")
    else:
        errs.extend(f"prefix part {m}" for m in is_dns1123_subdomain(prefix))
    if not name:
        errs.append("name part must be non-empty")
    elif len(name) > c.LABEL_VALUE_MAX_LENGTH:
        errs.append(f"name part {max_len_error(c.LABEL_VALUE_MAX_LENGTH)}")
    if not _full(_QUALIFIED_NAME_FMT, name):
        errs.append(f"name part {regex_error(_LABEL_KEY_MSG, _QUALIFIED_NAME_FMT, *examples)}")
    return errs


def validate_label_name(name: str, path: Path | str) -> ErrorList:
    """``metavalidation.ValidateLabelName``: one Invalid error per problem."""
    return ErrorList(invalid(path, name, m) for m in is_qualified_name(name))


def is_domain_prefixed_path(path: Path | str, value: str) -> ErrorList:
    """``IsDomainPrefixedPath``: ``acme.io/foo`` style names (Job ``managedBy`` rule)."""
    errs = ErrorList()
    if not value:
        errs.append(required(path, ""))
        return errs
    host, sep, rest = value.partition("/")
    if not sep or not host or not rest:
        errs.append(invalid(path, value,
                            'must be a domain-prefixed path (such as "acme.io/foo")'))
        return errs
    errs.extend(invalid(path, host, e) for e in is_dns1123_subdomain(host))
    if not _full(_HTTP_PATH_FMT, rest):
        errs.append(invalid(path, rest, regex_error("Invalid path", _HTTP_PATH_FMT)))
    return errs
