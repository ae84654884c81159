"""with_custom_validator: dispatch by operation and controller-runtime's denial mapping."""

from __future__ import annotations

from typing import Any

import pytest

from jobframework import field
from jobframework.runtime import errors
from jobframework.webhook import (
    AdmissionRequest,
    ValidationError,
    Warnings,
    aggregate_message,
    with_custom_validator,
)

QUEUE_PATH = "metadata.labels[kueue.x-k8s.io/queue-name]"


class RecordingValidator:
    """Records its calls; ``outcome`` (an exception or warnings) decides the answer."""

    def __init__(self, outcome: Any = None) -> None:
        self.outcome = outcome
        self.calls: list[tuple[str, Any, Any]] = []

    def _answer(self) -> Warnings:
        if isinstance(self.outcome, BaseException):
            raise self.outcome
        return self.outcome  # type: ignore[no-any-return]

    async def validate_create(self, obj: dict[str, Any], request: AdmissionRequest) -> Warnings:
        self.calls.append(("create", obj, None))
        obj["metadata"]["name"] = "scribbled"
        return self._answer()

    async def validate_update(self, old: dict[str, Any], new: dict[str, Any],
                              request: AdmissionRequest) -> Warnings:
        self.calls.append(("update", old, new))
        return self._answer()

    async def validate_delete(self, obj: dict[str, Any], request: AdmissionRequest) -> Warnings:
        self.calls.append(("delete", obj, None))
        return self._answer()


class FieldError:
    """A stand-in for jobframework's field error: text and StatusCause."""

    def __init__(self, field: str, body: str, cause_type: str = "FieldValueInvalid") -> None:
        self.field, self.body, self.cause_type = field, body, cause_type

    def __str__(self) -> str:
        return f"{self.field}: {self.body}"

    def to_cause(self) -> dict[str, Any]:
        return {"reason": self.cause_type, "message": self.body, "field": self.field}


async def test_create_allowed_with_warnings(make_request: Any, job: Any) -> None:
    validator = RecordingValidator(["spec.foo is deprecated"])
    req = make_request("CREATE", job())
    resp = await with_custom_validator(validator).handle(req)
    assert (resp.allowed, resp.result, resp.warnings) == (
        True, {"code": 200}, ("spec.foo is deprecated",))
    # The validator got a copy: its scribbling does not reach the request.
    assert req.object is not None and req.object["metadata"]["name"] == "job"


async def test_update_passes_old_and_new(make_request: Any, job: Any) -> None:
    validator = RecordingValidator()
    await with_custom_validator(validator).handle(make_request("UPDATE", job("new"), job("old")))
    kind, old, new = validator.calls[0]
    assert (kind, old["metadata"]["name"], new["metadata"]["name"]) == ("update", "old", "new")


async def test_delete_validates_the_old_object(make_request: Any, job: Any) -> None:
    validator = RecordingValidator()
    resp = await with_custom_validator(validator).handle(make_request("DELETE", None, job("gone")))
    assert resp.allowed
    assert validator.calls[0][0] == "delete"
    assert validator.calls[0][1]["metadata"]["name"] == "gone"


async def test_connect_is_not_validated(make_request: Any, job: Any) -> None:
    validator = RecordingValidator(RuntimeError("must not be called"))
    resp = await with_custom_validator(validator).handle(make_request("CONNECT", job()))
    assert resp.allowed and validator.calls == []


async def test_update_without_old_object_is_a_400(make_request: Any, job: Any) -> None:
    validator = RecordingValidator()
    resp = await with_custom_validator(validator).handle(make_request("UPDATE", job()))
    assert (resp.allowed, resp.code, resp.message) == (False, 400, "there is no content to decode")
    assert validator.calls == []


async def test_invalid_error_is_a_422_with_causes(make_request: Any, job: Any) -> None:
    causes = [{"reason": "FieldValueInvalid", "field": QUEUE_PATH,
               "message": 'Invalid value: "Bad": a lowercase RFC 1123 subdomain'}]
    invalid = errors.new_invalid("Job", "job", causes, group="batch")
    resp = await with_custom_validator(RecordingValidator(invalid)).handle(
        make_request("CREATE", job()))
    assert (resp.allowed, resp.code, resp.reason) == (False, 422, "Invalid")
    assert resp.causes == causes
    assert resp.message == (f'Job.batch "job" is invalid: {QUEUE_PATH}: '
                            'Invalid value: "Bad": a lowercase RFC 1123 subdomain')
    assert resp.result is not None and resp.result["details"]["kind"] == "Job"


async def test_validation_error_to_invalid(make_request: Any, job: Any) -> None:
    errs = ValidationError([FieldError(QUEUE_PATH, "Invalid value: \"\": field is immutable"),
                            FieldError("spec.parallelism", "Forbidden: cannot change",
                                       "FieldValueForbidden")])
    resp = await with_custom_validator(
        RecordingValidator(errs.to_invalid("Job", "job", "batch"))
    ).handle(make_request("CREATE", job()))
    assert (resp.code, resp.reason) == (422, "Invalid")
    assert [c["reason"] for c in resp.causes] == ["FieldValueInvalid", "FieldValueForbidden"]
    assert resp.message.startswith('Job.batch "job" is invalid: [metadata.labels')


async def test_field_error_list_denies_403_with_aggregate_text(make_request: Any,
                                                               job: Any) -> None:
    # Kueue returns allErrs.ToAggregate(): not an APIStatus, so a plain denial.
    a = FieldError(QUEUE_PATH, 'Invalid value: "x": field is immutable')
    b = FieldError("spec.parallelism", "Forbidden: cannot change")
    errs = ValidationError([a, b, a], warnings=["careful"])
    resp = await with_custom_validator(RecordingValidator(errs)).handle(
        make_request("UPDATE", job(), job()))
    assert resp.result == {
        "code": 403, "reason": "Forbidden",
        "message": f'[{QUEUE_PATH}: Invalid value: "x": field is immutable, '
                   'spec.parallelism: Forbidden: cannot change]',
    }
    assert resp.warnings == ("careful",)
    assert errs.causes[0] == {"reason": "FieldValueInvalid", "field": QUEUE_PATH,
                              "message": 'Invalid value: "x": field is immutable'}


async def test_single_error_text_is_unbracketed(make_request: Any, job: Any) -> None:
    errs = ValidationError([{"field": "spec.x", "message": "Required value"}])
    resp = await with_custom_validator(RecordingValidator(errs)).handle(
        make_request("CREATE", job()))
    assert resp.message == "spec.x: Required value"


async def test_plain_exception_denies_with_its_message(make_request: Any, job: Any) -> None:
    resp = await with_custom_validator(RecordingValidator(RuntimeError("nope"))).handle(
        make_request("DELETE", None, job()))
    assert resp.result == {"code": 403, "reason": "Forbidden", "message": "nope"}


async def test_other_api_errors_keep_their_status(make_request: Any, job: Any) -> None:
    err = errors.Forbidden("queue is closed")
    resp = await with_custom_validator(RecordingValidator(err)).handle(
        make_request("CREATE", job()))
    assert (resp.code, resp.reason, resp.message) == (403, "Forbidden", "queue is closed")
    assert resp.result is not None and resp.result["status"] == "Failure"


class Typed:
    def __init__(self, name: str) -> None:
        self.name = name


class TypedCodec:
    def decode(self, raw: dict[str, Any]) -> Typed:
        return Typed(raw["metadata"]["name"])

    def encode(self, obj: Typed) -> dict[str, Any]:
        raise AssertionError("validators never encode")


class TypedValidator:
    async def validate_create(self, obj: Typed, request: AdmissionRequest) -> Warnings:
        if obj.name != "ok":
            raise ValueError(f"name {obj.name!r} is not ok")
        return None

    async def validate_update(self, old: Typed, new: Typed, request: AdmissionRequest) -> Warnings:
        return None

    async def validate_delete(self, obj: Typed, request: AdmissionRequest) -> Warnings:
        return None


async def test_codec_gives_validators_typed_objects(make_request: Any, job: Any) -> None:
    handler = with_custom_validator(TypedValidator(), codec=TypedCodec())
    assert (await handler.handle(make_request("CREATE", job("ok")))).allowed
    resp = await handler.handle(make_request("CREATE", job("bad")))
    assert resp.message == "name 'bad' is not ok"


@pytest.mark.parametrize(
    ("messages", "text"),
    [([], ""), (["a"], "a"), (["a", "b"], "[a, b]"), (["a", "a"], "a"), (["a", "", "b", "a"],
                                                                          "[a, b]")],
)
def test_aggregate_message(messages: list[str], text: str) -> None:
    assert aggregate_message(messages) == text


async def test_jobframework_field_errors_work_both_ways(make_request: Any, job: Any) -> None:
    path = field.new_path("metadata", "labels").key("kueue.x-k8s.io/queue-name")
    errs = field.ErrorList([field.invalid(path, "x", "field is immutable"),
                            field.forbidden(field.new_path("spec", "parallelism"), "nope")])
    expected_text = (f'[{QUEUE_PATH}: Invalid value: "x": field is immutable, '
                     "spec.parallelism: Forbidden: nope]")
    # Kueue's `return nil, allErrs.ToAggregate()`: a 403 with the aggregate text.
    aggregate = errs.to_aggregate()
    assert aggregate is not None
    resp = await with_custom_validator(RecordingValidator(aggregate)).handle(
        make_request("CREATE", job()))
    assert (resp.code, resp.reason, resp.message) == (403, "Forbidden", expected_text)
    # The same list through ValidationError: same text, and causes for a 422.
    assert str(ValidationError(errs)) == expected_text
    invalid = ValidationError(errs).to_invalid("Job", "job", "batch")
    resp = await with_custom_validator(RecordingValidator(invalid)).handle(
        make_request("CREATE", job()))
    assert (resp.code, resp.reason) == (422, "Invalid")
    assert resp.causes == errs.to_causes()
