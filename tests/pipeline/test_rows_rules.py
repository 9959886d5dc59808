"""The import's row rules are the API's: delay limit, integer types per input format,
the shape of ``headers``, unknown fields and columns (``pipeline.rows``), and the Spark
side of them (``pipeline.encode.prevalidate``, a Parquet ``uint64`` column)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from api.schemas import MAX_DELAY_MS as API_MAX_DELAY_MS
from pipeline import rows
from pipeline.rows import COLUMNS, JobTimes, Rejected, check_columns, encode_row
from storage.errors import InvalidInputError
from storage.rules import MAX_TIME_MS
from tests.pipeline.helpers import LIMITS, NOW

TIMES = JobTimes(NOW, NOW, 0)
TOO_LONG_DELAY = 50_000_000_000_000  # NOW + this is within MAX_TIME_MS: only the cap refuses it


def _row(**fields: Any) -> dict[str, Any]:
    return {"topic": "orders", "id": "a"} | fields


def _deliver_ms(row: dict[str, Any], fmt: str) -> int:
    return int.from_bytes(encode_row(row, TIMES, LIMITS, fmt).ids_value, "big")


def _reason(row: dict[str, Any], fmt: str) -> str:
    with pytest.raises(Rejected) as exc:
        encode_row(row, TIMES, LIMITS, fmt)
    return str(exc.value)


def test_the_limits_are_the_apis():
    assert rows.MAX_DELAY_MS == API_MAX_DELAY_MS
    assert rows.MAX_MS == MAX_TIME_MS


@pytest.mark.parametrize(
    ("fmt", "too_long", "longest"),
    [
        ("jsonl", TOO_LONG_DELAY, API_MAX_DELAY_MS),
        ("csv", str(TOO_LONG_DELAY), str(API_MAX_DELAY_MS)),
        ("parquet", TOO_LONG_DELAY, API_MAX_DELAY_MS),
    ],
)
def test_delay_ms_is_capped_at_the_apis_max_delay(fmt, too_long, longest):
    reason = _reason(_row(delay_ms=too_long), fmt)
    assert "delay_ms must be between 0 and" in reason and str(API_MAX_DELAY_MS) in reason
    assert _deliver_ms(_row(delay_ms=longest), fmt) == NOW + API_MAX_DELAY_MS


@pytest.mark.parametrize("text", ["12", " +1_000 ", "١٢", "1000"])
def test_a_json_string_is_not_an_integer(text):
    assert "must be an integer, not a string" in _reason(_row(deliver_at_ms=text), "jsonl")
    assert "must be an integer, not a string" in _reason(_row(delay_ms=text), "jsonl")


@pytest.mark.parametrize(("value", "expected"), [(12, 12), (2.0, 2), (1e3, 1000), (NOW + 0.0, NOW)])
def test_json_integers_and_whole_floats_are_integers(value, expected):
    assert _deliver_ms(_row(deliver_at_ms=value), "jsonl") == expected


@pytest.mark.parametrize("value", [2.5, 1e300, float("inf"), True, [1], {"a": 1}])
def test_other_json_values_are_not_integers(value):
    assert "deliver_at_ms must be an integer" in _reason(_row(deliver_at_ms=value), "jsonl")


@pytest.mark.parametrize("text", [" 12", "12 ", "+12", "-1", "1_000", "١٢", "12\n", "1e3", "2.0"])
def test_a_csv_integer_is_plain_ascii_digits(text):
    assert "must be an integer of digits 0-9" in _reason(_row(deliver_at_ms=text), "csv")
    assert "must be an integer of digits 0-9" in _reason(_row(delay_ms=text), "csv")


def test_csv_digits_are_read_and_a_huge_number_is_out_of_range():
    assert _deliver_ms(_row(deliver_at_ms="0012"), "csv") == 12
    assert "out of range" in _reason(_row(deliver_at_ms="9" * 5000), "csv")


@pytest.mark.parametrize("value", [Decimal(12), Decimal("12.000"), 12, 12.0, "12"])
def test_parquet_integers_include_integral_decimals(value):
    assert _deliver_ms(_row(deliver_at_ms=value), "parquet") == 12


@pytest.mark.parametrize("value", [Decimal("12.5"), Decimal("NaN"), Decimal("Infinity")])
def test_a_fractional_decimal_is_not_an_integer(value):
    assert "deliver_at_ms must be an integer" in _reason(_row(deliver_at_ms=value), "parquet")


def test_a_uint64_beyond_the_range_is_refused_by_range():
    reason = _reason(_row(deliver_at_ms=Decimal(2**64 - 1)), "parquet")
    assert "deliver_at_ms must be between 0 and" in reason


@pytest.mark.parametrize("headers", ['{"k":"v"}', [["k", "v"]], "", 5, {"k": 1}])
def test_json_lines_headers_must_be_an_object_of_strings(headers):
    assert "headers must" in _reason(_row(deliver_at_ms=1, headers=headers), "jsonl")


def test_json_lines_headers_object_is_taken():
    e = encode_row(_row(deliver_at_ms=1, headers={"k": "v"}), TIMES, LIMITS, "jsonl")
    assert e == encode_row(_row(deliver_at_ms=1, headers='{"k":"v"}'), TIMES, LIMITS, "csv")


@pytest.mark.parametrize("headers", ['[["k","v"]]', '"x"', '{"k":1}', "{", "null"])
def test_csv_headers_must_be_the_json_text_of_an_object_of_strings(headers):
    reason = _reason(_row(deliver_at_ms=1, headers=headers), "csv")
    assert "headers" in reason and ("object" in reason or "strings" in reason)


def test_a_parquet_map_of_headers_is_taken():
    pairs = encode_row(_row(deliver_at_ms=1, headers=[("k", "v")]), TIMES, LIMITS, "parquet")
    assert pairs == encode_row(_row(deliver_at_ms=1, headers={"k": "v"}), TIMES, LIMITS)


def test_an_unknown_json_lines_field_rejects_the_row_naming_it():
    reason = _reason(_row(deliver_at_ms=1, payload_base64="eA=="), "jsonl")
    assert "unknown field 'payload_base64'" in reason


def test_check_columns_takes_the_timer_fields_and_names_an_unknown_column():
    check_columns(list(COLUMNS))
    check_columns(["topic", "id", "delay_ms"])
    check_columns([*COLUMNS, "reject_reason", "reject_row", "reject_file"])  # a rejects file
    with pytest.raises(InvalidInputError) as exc:
        check_columns(["topic", "id", "delay_ms", "payload_base64"])
    assert exc.value.field == "payload_base64"
    assert "unknown column 'payload_base64'" in exc.value.message


@pytest.mark.spark
def test_prevalidate_refuses_an_input_with_an_unknown_column(spark):
    from pipeline.encode import prevalidate

    names = ["topic", "id", "delay_ms", "payload_base64"]
    df = spark.createDataFrame([("orders", "a", "1", "eA==")], names)
    with pytest.raises(InvalidInputError) as exc:
        prevalidate(df, TIMES)
    assert exc.value.field == "payload_base64"


@pytest.mark.spark
def test_a_parquet_uint64_column_imports(spark, tmp_path):
    from pipeline.importer import run_import

    table = pa.table(
        {
            "topic": pa.array(["orders"] * 3, pa.string()),
            "id": pa.array(["a", "b", "c"], pa.string()),
            "deliver_at_ms": pa.array([NOW, NOW + 1, 2**64 - 1], pa.uint64()),
        }
    )
    pq.write_table(table, tmp_path / "in.parquet")
    summary = run_import(
        spark, str(tmp_path / "in.parquet"), str(tmp_path / "stage"), times=TIMES, limits=LIMITS
    )
    assert (summary.accepted, summary.rejected) == (2, 1)
    rejected = pq.read_table(summary.rejects_path).to_pylist()
    assert "deliver_at_ms must be between" in rejected[0]["reject_reason"]
