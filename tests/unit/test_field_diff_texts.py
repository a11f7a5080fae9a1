"""The diff's texts of floats: written once per value and then looked up, always as the
format writes them (zero's sign too: -0.0 equals 0.0 as a key but is not written alike)."""

from __future__ import annotations

from membrane_es.queries import field_diff


def test_a_float_reads_as_its_format_however_often_it_is_written() -> None:
    values = [1.0, 0.5, 1.0, 0.0, -0.0, 0.0, -0.0, 0.12345, 1e300, -2.5, 1.0]
    assert [field_diff.flatten({"x": v})["x"] for v in values] == [f"{v:.3f}" for v in values]


def test_the_table_of_written_floats_stays_bounded() -> None:
    for i in range(field_diff._FLOAT_TEXTS_MAX + 10):
        value = 1.0 + i / 7
        assert field_diff.flatten({"x": value})["x"] == f"{value:.3f}"
    assert 0 < len(field_diff._FLOAT_TEXTS) <= field_diff._FLOAT_TEXTS_MAX
